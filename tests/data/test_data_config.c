/* The `data:` config section: each class builds, its keys are read (so
 * the strict check passes), and wrong values or missing files give errors
 * that name the config location and the fix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data_module.h"
#include "weft/config.h"
#include "weft_test.h"

static weft_status build(const char *yaml, weft_config **cfg, weft_data_module **m)
{
	weft_data_env env = { .world = 1, .rank = 0, .seed = 42 };
	weft_status st;

	*m = NULL;
	WT_OK(weft_config_load_string("data.yaml", yaml, strlen(yaml), cfg));
	st = weft_data_module_from_config(weft_cfg_get(weft_config_root(*cfg), "data"), &env, m);
	return st;
}

int main(void)
{
	char text[64], yaml[1024];
	weft_config *cfg = NULL;
	weft_data_module *m = NULL;
	weft_loader *l = NULL;
	const weft_host_batch *b;
	FILE *f;

	snprintf(text, sizeof(text), "data_cfg_%ld.txt", (long)getpid());
	f = fopen(text, "w");
	WT_REQUIRE(f);
	for (int i = 0; i < 500; i++)
		fputs("Lorem ipsum.\n", f); /* 13 bytes x 500 = 6500 tokens */
	fclose(f);

	/* Text as bytes: 6500 tokens, 20% for validation. */
	snprintf(yaml, sizeof(yaml),
		 "data:\n  class: text\n  paths: [%s]\n  block_size: 8\n  batch_size: 4\n"
		 "  val_fraction: 0.2\n  num_workers: 1\n  prefetch: 3\n  sampling: random\n",
		 text);
	WT_OK(build(yaml, &cfg, &m));
	WT_OK(weft_config_check_unused(cfg));
	WT_CHECK(m->kind == WEFT_DATA_LM && m->vocab_size == 256 && m->block_size == 8);
	WT_CHECK(m->train_examples == 5200 && m->val_examples == 1300 && m->prefetch == 3);
	WT_OK(weft_data_module_loader(m, 0, &l));
	WT_OK(weft_loader_start_epoch(l, 0, 0));
	WT_OK(weft_loader_next(l, &b));
	WT_CHECK(b && b->x.shape[0] == 4 && b->x.shape[1] == 8 && b->y.shape[1] == 8);
	weft_loader_destroy(l);
	WT_OK(weft_data_module_loader(m, 1, &l));
	/* Validation is sequential over the last 1300 tokens: (1299 / 8) / 4. */
	WT_CHECK(weft_loader_num_batches(l) == 40);
	weft_loader_destroy(l);
	weft_data_module_free(m);
	weft_config_free(cfg);

	/* Missing block_size, a misspelt class, a bad range: config errors
	 * with the place. */
	snprintf(yaml, sizeof(yaml), "data:\n  class: text\n  paths: %s\n", text);
	WT_FAILS(build(yaml, &cfg, &m), WEFT_ERR_CONFIG, "data.yaml:2:", "needs 'block_size'");
	weft_config_free(cfg);
	WT_FAILS(build("data:\n  class: fashionmnist\n", &cfg, &m), WEFT_ERR_CONFIG,
		 "fashion_mnist");
	weft_config_free(cfg);
	WT_FAILS(build("data:\n  class: fashion_mnist\n  batch_size: 0\n", &cfg, &m),
		 WEFT_ERR_CONFIG, "data.yaml:3:", "must be >= 1");
	weft_config_free(cfg);
	snprintf(yaml, sizeof(yaml), "data:\n  class: text\n  paths: %s\n  block_size: 8\n"
		 "  val_fraction: 1.5\n", text);
	WT_FAILS(build(yaml, &cfg, &m), WEFT_ERR_CONFIG, "data.yaml:5:", "[0, 1)");
	weft_config_free(cfg);

	/* A missing dataset names the path, the key's place and the package. */
	WT_FAILS(build("data:\n  class: fashion_mnist\n  path: /nonexistent-fmnist\n", &cfg, &m),
		 WEFT_ERR_NOT_FOUND, "data.yaml:3:", "data.path",
		 "/nonexistent-fmnist/train-images-idx3-ubyte.gz",
		 "apt-get install dataset-fashion-mnist");
	weft_config_free(cfg);
	WT_FAILS(build("data:\n  class: text\n  paths: [/usr/share/games/fortunes/nope]\n"
		       "  block_size: 8\n", &cfg, &m),
		 WEFT_ERR_NOT_FOUND, "data.paths", "fortunes-min");
	weft_config_free(cfg);

	/* A key the data section does not know is caught by the strict check. */
	snprintf(yaml, sizeof(yaml), "data:\n  class: text\n  paths: %s\n  block_size: 8\n"
		 "  batchsize: 4\n", text);
	WT_OK(build(yaml, &cfg, &m));
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG, "batchsize", "batch_size");
	weft_data_module_free(m);
	weft_config_free(cfg);

	/* Fashion-MNIST through the config, when installed: the test split is
	 * the validation set unless val_fraction carves one from train. */
	if (access(WEFT_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK) == 0) {
		WT_OK(build("data:\n  class: fashion_mnist\n  batch_size: 64\n  normalize: true\n"
			    "  num_workers: 0\n", &cfg, &m));
		WT_OK(weft_config_check_unused(cfg));
		WT_CHECK(m->kind == WEFT_DATA_CLASSIFICATION && m->num_classes == 10);
		WT_CHECK(m->input_ndim == 2 && m->input_shape[0] == 28 && m->input_shape[1] == 28);
		WT_CHECK(m->train_examples == 60000 && m->val_examples == 10000 && m->prefetch == 0);
		WT_OK(weft_data_module_loader(m, 0, &l));
		WT_CHECK(weft_loader_num_batches(l) == 938); /* ceil(60000 / 64) */
		weft_loader_destroy(l);
		weft_data_module_free(m);
		weft_config_free(cfg);
	}
	remove(text);
	return wt_done("test_data_config");
}
