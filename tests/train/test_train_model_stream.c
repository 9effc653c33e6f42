/* model.safetensors streamed from a strategy's params_visit
 * (core/train/model_stream.c), in one process with a stand-in strategy
 * whose visit hands out each parameter of a small GPT in order (or, to
 * test the checks, out of order or only some):
 * - the file is byte for byte what weft_model_save_safetensors writes of
 *   the same model;
 * - a path that cannot be created gives one WEFT_ERR_IO naming it, and the
 *   visit still runs to its end (the other ranks are in it: a writer that
 *   stopped would leave them waiting);
 * - a non-writer rank writes nothing and succeeds;
 * - a strategy that visits out of order, or skips parameters, is reported
 *   naming the indices, not written as a wrong file silently.
 * No tolerance: bytes are compared exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/model_stream.h"
#include "train_test.h"
#include "weft/module.h"
#include "weft/status.h"

typedef struct fake {
	const weft_params *ps;
	int mode;       /* 0 in order, 1 swap the first two, 2 stop after one */
	size_t visited; /* fn calls */
} fake;

static weft_status visit(void *s, weft_status (*fn)(void *user, size_t index, const weft_tensor *p),
			 void *user)
{
	fake *f = s;
	size_t n = weft_params_count(f->ps);

	for (size_t k = 0; k < n; k++) {
		size_t i = f->mode == 1 && k < 2 ? 1 - k : k;
		weft_status st;

		if (f->mode == 2 && k == 1)
			break;
		st = fn(user, i, weft_params_at(f->ps, i));
		f->visited++;
		if (st)
			return st;
	}
	return WEFT_OK;
}

static const weft_strategy_ops ops = {
	.head = WEFT_PLUGIN_HEAD(weft_strategy_ops, "fake"),
	.params_visit = visit,
};

static long read_all(const char *path, char **out)
{
	FILE *f = fopen(path, "rb");
	long n;

	*out = NULL;
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	*out = malloc((size_t)n + 1);
	if (!*out || fread(*out, 1, (size_t)n, f) != (size_t)n)
		n = -1;
	fclose(f);
	return n;
}

int main(void)
{
	weft_gpt_config g = { .n_layer = 2, .n_head = 2, .n_embd = 16, .vocab_size = 64,
			      .block_size = 8, .bias = 1 };
	weft_model_options mo = { .device = WEFT_CPU, .seed = 3 };
	weft_model *m = NULL;
	fake f;
	char a[TT_PATH + 32], b[TT_PATH + 32], bad[TT_PATH + 64];
	char *fa = NULL, *fb = NULL;
	long la, lb;
	size_t n;
	weft_model_meta meta;

	tt_scratch("train_model_stream");
	WT_REQUIRE(weft_model_create_gpt(&g, &mo, &m) == WEFT_OK);
	weft_model_st_meta(m, &meta);
	n = weft_params_count(weft_model_params(m));
	WT_CHECK(weft_model_stream_available(&ops));

	/* byte for byte the whole-model save */
	snprintf(a, sizeof(a), "%s/streamed.safetensors", tt_dir);
	snprintf(b, sizeof(b), "%s/whole.safetensors", tt_dir);
	f = (fake){ .ps = weft_model_params(m) };
	WT_CHECK(weft_model_stream_save(&ops, &f, f.ps, &meta, 1, a) == WEFT_OK);
	WT_CHECK(f.visited == n);
	WT_CHECK(weft_model_save_safetensors(m, b) == WEFT_OK);
	la = read_all(a, &fa);
	lb = read_all(b, &fb);
	WT_CHECK(la > 0 && la == lb && !memcmp(fa, fb, (size_t)la));
	free(fa);
	free(fb);

	/* a writer that cannot create its file: one error naming it, the
	 * visit run to its end */
	snprintf(bad, sizeof(bad), "%s/no/such/dir/model.safetensors", tt_dir);
	f = (fake){ .ps = weft_model_params(m) };
	WT_FAILS(weft_model_stream_save(&ops, &f, f.ps, &meta, 1, bad), WEFT_ERR_IO, "cannot create",
		 "no/such/dir/model.safetensors");
	WT_CHECK(f.visited == n);

	/* not the writer: nothing written, success */
	f = (fake){ .ps = weft_model_params(m) };
	WT_CHECK(weft_model_stream_save(&ops, &f, f.ps, &meta, 0, bad) == WEFT_OK);
	WT_CHECK(f.visited == n && access(bad, F_OK) != 0);

	/* a strategy that visits out of order, or not everything */
	f = (fake){ .ps = weft_model_params(m), .mode = 1 };
	WT_FAILS(weft_model_stream_save(&ops, &f, f.ps, &meta, 1, a), WEFT_ERR_INTERNAL,
		 "visited parameter 1 where 0 comes next", "streamed.safetensors");
	WT_CHECK(f.visited == n);
	f = (fake){ .ps = weft_model_params(m), .mode = 2 };
	WT_FAILS(weft_model_stream_save(&ops, &f, f.ps, &meta, 1, a), WEFT_ERR_INTERNAL,
		 "visited 1 of", "parameters");

	weft_model_free(m);
	tt_cleanup();
	return wt_done("test_train_model_stream");
}
