/* examples/gpt_char.yaml learns more than byte frequencies: its validation
 * loss falls clearly below the unigram entropy of its training bytes.
 *
 * The entropy is computed here from the files the example names
 * (data.paths, concatenated in order) and the trainer's split (the last
 * floor(n * val_fraction) bytes validate). The example runs for 120 steps
 * instead of 600 (the cosine schedule then spans 120 steps; validation at
 * step 120 instead of the example's 200) and the final val_loss must be
 * below entropy - 0.5 nats: a model that only learnt the byte frequencies
 * scores the unigram cross-entropy (about the entropy, 3.27 nats here,
 * higher on the held-out tail), so half a nat below it needs context.
 *
 * Measured on the 2-core development machine (fortunes-min's three files,
 * 98399 bytes, 88560 training bytes): unigram entropy 3.2698 nats = 4.7173
 * bits; val_loss at step 120 2.605 nats (0.66 below the entropy, 0.16
 * below the bound), 47 s of CPU; at step 200 2.499 nats (86 s of CPU);
 * the full 600 steps reach ~2.24 nats in ~160 s.
 *
 * Labelled "slow" (the ASan pass skips it). Skipped (77) when the fortune
 * files are missing (apt-get install fortunes-min fortunes).
 */
#include "base/json.h"
#include "train_test.h"
#include "weft/config.h"
#include "weft/status.h"

/* the steps run (and validated at the last) */
#define STEPS 120
#define STR_(x) #x
#define STR(x) STR_(x)

/* Unigram entropy (nats) of the first `train` bytes of the concatenation
 * of `paths`; *total gets the concatenation's length. */
static double unigram_entropy(const char *const *paths, size_t n, double val_fraction,
			      int64_t *total, int64_t *train_bytes)
{
	int64_t counts[256] = { 0 }, all = 0, train, seen = 0;
	double h = 0;

	/* first pass: the total length, for the split */
	for (size_t i = 0; i < n; i++) {
		size_t len = 0;
		char *d = tt_read(paths[i], &len);

		WT_REQUIRE(d);
		all += (int64_t)len;
		free(d);
	}
	train = all - (int64_t)((double)all * val_fraction);
	for (size_t i = 0; i < n && seen < train; i++) {
		size_t len = 0;
		unsigned char *d = (unsigned char *)tt_read(paths[i], &len);

		WT_REQUIRE(d);
		for (size_t j = 0; j < len && seen < train; j++, seen++)
			counts[d[j]]++;
		free(d);
	}
	for (int b = 0; b < 256; b++) {
		if (counts[b]) {
			double p = (double)counts[b] / (double)train;

			h -= p * log(p);
		}
	}
	*total = all;
	*train_bytes = train;
	return h;
}

int main(void)
{
	const char *src = getenv("WEFT_SOURCE_DIR");
	const char *paths[16];
	size_t n = 0;
	char cfg_path[TT_PATH];
	weft_config *cfg = NULL;
	const weft_cfg *data, *list;
	weft_json_value *sum = NULL;
	const weft_json_value *fm, *vl;
	double vf = 0.1, h, t0;
	int64_t total = 0, train = 0;
	int rc;

	WT_REQUIRE(src);
	snprintf(cfg_path, sizeof(cfg_path), "%s/examples/gpt_char.yaml", src);
	WT_OK(weft_config_load_file(cfg_path, &cfg));
	data = weft_cfg_get(weft_config_root(cfg), "data");
	list = weft_cfg_get(data, "paths");
	WT_REQUIRE(list && weft_cfg_kind_of(list) == WEFT_CFG_SEQ);
	WT_OK(weft_cfg_float(data, "val_fraction", 0.1, &vf));
	for (size_t i = 0; i < weft_cfg_size(list) && n < 16; i++) {
		WT_OK(weft_cfg_as_str(weft_cfg_at(list, i), &paths[n]));
		if (!tt_exists(paths[n])) {
			printf("skipped: %s is missing (apt-get install fortunes-min fortunes)\n",
			       paths[n]);
			weft_config_free(cfg);
			return 77;
		}
		n++;
	}
	h = unigram_entropy(paths, n, vf, &total, &train);
	weft_config_free(cfg);
	fprintf(stderr, "corpus %lld bytes, %lld for training: unigram entropy %.4f nats = %.4f "
		"bits\n", (long long)total, (long long)train, h, h / log(2.0));

	tt_scratch("weft_train_gpt_example");
	t0 = tt_now();
	rc = tt_weft("fit", "fit", "--config", cfg_path, "--trainer.max_steps=" STR(STEPS),
		     "--trainer.val_check_interval=" STR(STEPS),
		     "--trainer.enable_progress_bar=false");
	WT_REQUIRE(tt_expect_ok("fit", rc));
	WT_OK(weft_json_parse_file(tt_path("runs/gpt_char/version_0/summary.json"), &sum));
	fm = weft_json_get(sum, "final_metrics");
	vl = fm ? weft_json_get(fm, "val_loss") : NULL;
	WT_REQUIRE(vl && vl->kind == WEFT_JSON_NUMBER);
	WT_CHECK(weft_json_get(sum, "steps") && weft_json_get(sum, "steps")->integer == STEPS);
	fprintf(stderr, "gpt_char, %d steps: val_loss %.4f nats (%.4f bits), entropy - val_loss "
		"= %.3f nats, %.1f s\n", STEPS, vl->number, vl->number / log(2.0), h - vl->number,
		tt_now() - t0);
	WT_CHECK(vl->number < h - 0.5);
	weft_json_free(sum);
	tt_cleanup();
	return wt_done("test_train_gpt_example");
}
