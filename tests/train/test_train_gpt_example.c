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
#include "example_test.h"

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
	const char *paths[16];
	size_t n = 0;
	char cfg_path[TT_PATH];
	weft_config *cfg = NULL;
	weft_json_value *sum = NULL;
	double vf, h, val_loss, t0;
	int64_t total = 0, train = 0;
	int rc;

	if (!tt_example_data("gpt_char", cfg_path, &cfg, paths, 16, &n, &vf))
		return 77;
	h = unigram_entropy(paths, n, vf, &total, &train);
	weft_config_free(cfg);
	fprintf(stderr, "corpus %lld bytes, %lld for training: unigram entropy %.4f nats = %.4f "
		"bits\n", (long long)total, (long long)train, h, h / log(2.0));

	tt_scratch("weft_train_gpt_example");
	t0 = tt_now();
	rc = tt_weft("fit", "fit", "--config", cfg_path, "--trainer.max_steps=" STR(STEPS),
		     "--trainer.val_check_interval=" STR(STEPS),
		     "--trainer.enable_progress_bar=false");
	val_loss = tt_example_val_loss("fit", rc, "gpt_char", &sum);
	WT_CHECK(weft_json_get(sum, "steps") && weft_json_get(sum, "steps")->integer == STEPS);
	fprintf(stderr, "gpt_char, %d steps: val_loss %.4f nats (%.4f bits), entropy - val_loss "
		"= %.3f nats, %.1f s\n", STEPS, val_loss, val_loss / log(2.0), h - val_loss,
		tt_now() - t0);
	WT_CHECK(val_loss < h - 0.5);
	weft_json_free(sum);
	tt_cleanup();
	return wt_done("test_train_gpt_example");
}
