/* examples/fashion_mnist_mlp.yaml as it is (2 processes, ddp over gloo,
 * 5 epochs) reaches the MLP baseline published with Fashion-MNIST: test
 * accuracy >= 0.87 (the example validates on the test split, so
 * summary.json's val_acc is the test accuracy).
 *
 * Measured on the 2-core development machine: val_acc 0.891 in 14 s with
 * one process (single strategy); see the report in the commit for the ddp
 * figure. The bar is the issue's, not a tolerance: 0.87 is the published
 * 256-256 MLP figure's neighbourhood, and a broken optimizer, schedule,
 * data order or gradient average lands far below it (a linear model
 * reaches ~0.84).
 *
 * Labelled "slow" (the ASan pass skips it): full epochs of Fashion-MNIST.
 * Skipped (77) when the dataset package is not installed.
 */
#include "base/json.h"
#include "train_test.h"
#include "weft/status.h"

#define FMNIST "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"

int main(void)
{
	const char *src = getenv("WEFT_SOURCE_DIR");
	const weft_json_value *fm, *acc, *ws;
	weft_json_value *sum = NULL;
	char cfg[TT_PATH];
	double t0;
	int rc;

	if (!tt_exists(FMNIST)) {
		printf("skipped: %s is missing (apt-get install dataset-fashion-mnist)\n", FMNIST);
		return 77;
	}
	WT_REQUIRE(src);
	snprintf(cfg, sizeof(cfg), "%s/examples/fashion_mnist_mlp.yaml", src);
	tt_scratch("weft_train_fmnist");
	t0 = tt_now();
	rc = tt_weft("fit", "fit", "--config", cfg, "--trainer.enable_progress_bar=false");
	WT_REQUIRE(tt_expect_ok("fit", rc));
	WT_OK(weft_json_parse_file(tt_path("runs/fashion_mnist_mlp/version_0/summary.json"), &sum));
	fm = weft_json_get(sum, "final_metrics");
	acc = fm ? weft_json_get(fm, "val_acc") : NULL;
	ws = weft_json_get(sum, "world_size");
	WT_REQUIRE(acc && acc->kind == WEFT_JSON_NUMBER);
	fprintf(stderr, "fashion_mnist_mlp: val_acc (test split) %.4f, world size %lld, %.1f s\n",
		acc->number, ws ? (long long)ws->integer : -1LL, tt_now() - t0);
	WT_CHECK(acc->number >= 0.87);
	weft_json_free(sum);
	tt_cleanup();
	return wt_done("test_train_fashion_mnist");
}
