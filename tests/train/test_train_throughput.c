/* Tokens/s and MFU, as Lightning's ThroughputMonitor reports them
 * (core/train/throughput.c):
 *   - the training FLOPs per token of two GPT shapes equal the hand count
 *     6 N + 12 L C T (N the parameters a token passes through, the tied
 *     head once, wte and wpe lookups not counted), exactly;
 *   - the CPU's default peak is threads x clock x FLOPs per cycle from the
 *     vector flags of a /proc/cpuinfo text, and says how it was derived;
 *   - a GPT fit with callbacks: {throughput_monitor: {}} writes
 *     tokens_per_sec, tokens_per_sec_avg, mfu and mfu_avg to metrics.csv at
 *     every logged step, mfu = tokens_per_sec x FLOPs per token /
 *     trainer.peak_flops, the average lies within the steps' range, and the
 *     progress lines show tokens/s and mfu; without the callback
 *     metrics.csv has no such column, the progress lines still show them;
 *   - an MLP on 2 ranks with [{class: ThroughputMonitor}] logs samples per
 *     second over both ranks and MFU against the peak of 2 devices;
 *   - a bad trainer.peak_flops, and options given to the callback, are one
 *     error each naming the key.
 * Tolerances: FLOP counts are integers below 2^53: exact. metrics.csv
 * prints 9 significant digits, so a ratio of two printed values is good to
 * 1e-8; 1e-6 relative is asked.
 */
#include <math.h>

#include "train/throughput.h"
#include "train_test.h"
#include "weft/module.h"

/* N by hand for nanoGPT's GPT: per layer ln_1, c_attn, attn.c_proj, ln_2,
 * c_fc, mlp.c_proj; then ln_f and the head (wte, tied). */
static double hand_flops(int64_t L, int64_t C, int64_t V, int bias, int64_t T)
{
	double ln = bias ? 2.0 * C : (double)C;
	double lin_b = bias ? 1.0 : 0.0;
	double layer = ln + (3.0 * C * C + lin_b * 3 * C) + (1.0 * C * C + lin_b * C) + ln +
		       (4.0 * C * C + lin_b * 4 * C) + (4.0 * C * C + lin_b * C);
	double n = (double)L * layer + ln + (double)V * C;

	return 6.0 * n + 12.0 * (double)L * (double)C * (double)T;
}

static void flops_of_shapes(void)
{
	const struct {
		int64_t L, H, C, V, block, T;
		int bias;
	} s[] = { { 2, 4, 32, 64, 16, 16, 1 }, { 3, 2, 48, 256, 64, 40, 0 } };

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		weft_gpt_config cfg = { .n_layer = s[i].L, .n_head = s[i].H, .n_embd = s[i].C,
					.vocab_size = s[i].V, .block_size = s[i].block,
					.bias = s[i].bias };
		weft_model_options mo = { .seed = 1 };
		weft_model *m = NULL;

		WT_REQUIRE(weft_model_create_gpt(&cfg, &mo, &m) == WEFT_OK);
		WT_CHECK(weft_throughput_flops_per_token(m, s[i].T, weft_model_num_params(m)) ==
			 hand_flops(s[i].L, s[i].C, s[i].V, s[i].bias, s[i].T));
		weft_model_free(m);
	}
	/* the first shape written out: N = 2 (12 32^2 + 13 32) + 2 32 + 64 32 */
	WT_CHECK(hand_flops(2, 32, 64, 1, 16) == 6.0 * 27520 + 12.0 * 2 * 32 * 16);
}

static void cpu_peak(void)
{
	char buf[256];
	const char *how = buf; /* (a pointer: WT_STR_CONTAINS tests it for NULL) */

	WT_CLOSE(weft_cpu_peak_flops("processor\t: 0\nmodel name\t: AMD EPYC\n"
				     "cpu MHz\t\t: 2445.406\nflags\t\t: fpu sse avx fma avx2 bmi2\n",
				     2, buf, sizeof(buf)),
		 2 * 2445.406e6 * 32, 1e-12, 0);
	WT_STR_CONTAINS(how, "2 threads x 2445 MHz x 32 float32 FLOP/cycle (AVX2+FMA");
	WT_CLOSE(weft_cpu_peak_flops("cpu MHz : 2000\nflags : avx2 fma avx512f avx512bw\n", 1, buf,
				     sizeof(buf)), 2000e6 * 64, 1e-12, 0);
	/* avx512_bf16 is not avx512f; no fma: AVX's 16 */
	WT_CLOSE(weft_cpu_peak_flops("flags : avx avx512_bf16\ncpu MHz : 1000\n", 1, buf,
				     sizeof(buf)), 1000e6 * 16, 1e-12, 0);
	WT_CHECK(weft_cpu_peak_flops("processor : 0\nflags : avx2 fma\n", 4, buf, sizeof(buf)) == 0);
	WT_STR_CONTAINS(how, "no 'cpu MHz'");
}

static const char *gpt_yaml =
	"seed_everything: 5\n"
	"trainer:\n"
	"  max_steps: 6\n"
	"  log_every_n_steps: 1\n"
	"  enable_checkpointing: false\n"
	"  peak_flops: 1.0e9\n"
	"  callbacks: {throughput_monitor: {}}\n"
	"model: {class: gpt, n_layer: 2, n_head: 4, n_embd: 32, vocab_size: 256, block_size: 16,\n"
	"        bias: true, dropout: 0.0}\n"
	"data:\n"
	"  class: text\n"
	"  paths: [corpus.txt]\n"
	"  block_size: 16\n"
	"  batch_size: 4\n"
	"  batches_per_epoch: 10\n"
	"optimizer: {name: adamw, lr: 1.0e-3}\n";

static void gpt_fit(void)
{
	const double F = hand_flops(2, 32, 256, 1, 16);
	double lo = INFINITY, hi = 0;
	char *csv;
	int rc;

	tt_write_text(tt_path("gpt.yaml"), gpt_yaml);
	rc = tt_weft("gpt", "fit", "--config", "gpt.yaml");
	WT_REQUIRE(tt_expect_ok("gpt", rc));
	WT_STR_CONTAINS(tt_output("gpt", "err"), "MFU: model FLOPs over a peak of 1 GFLOP/s per "
			"device x 1 device (trainer.peak_flops)");
	/* the progress lines (not a terminal: plain lines) */
	WT_STR_CONTAINS(tt_output("gpt", "err"), " tokens/s=");
	WT_STR_CONTAINS(tt_output("gpt", "err"), " mfu=");
	csv = tt_read(tt_path("runs/gpt/version_0/metrics.csv"), NULL);
	WT_REQUIRE(csv);
	for (int step = 1; step <= 6; step++) {
		double tok = tt_csv_value(csv, "tokens_per_sec", step);
		double avg = tt_csv_value(csv, "tokens_per_sec_avg", step);

		WT_CHECK(tok > 0);
		WT_CHECK(avg > 0);
		WT_CLOSE(tt_csv_value(csv, "mfu", step), tok * F / 1e9, 1e-6, 0);
		WT_CLOSE(tt_csv_value(csv, "mfu_avg", step), avg * F / 1e9, 1e-6, 0);
		lo = fmin(lo, tok);
		hi = fmax(hi, tok);
		/* the average over the steps so far: within their range */
		WT_CHECK(avg >= lo * (1 - 1e-6) && avg <= hi * (1 + 1e-6));
	}
	WT_CHECK(isnan(tt_csv_value(csv, "samples_per_sec", 1)));
	free(csv);

	/* without the callback: the bar only */
	rc = tt_weft("gpt_off", "fit", "--config", "gpt.yaml", "--trainer.name=off",
		     "--trainer.callbacks={}");
	WT_REQUIRE(tt_expect_ok("gpt_off", rc));
	WT_STR_CONTAINS(tt_output("gpt_off", "err"), " tokens/s=");
	csv = tt_read(tt_path("runs/off/version_0/metrics.csv"), NULL);
	WT_REQUIRE(csv);
	WT_CHECK(!isnan(tt_csv_value(csv, "train_loss", 1)));
	WT_CHECK(!strstr(csv, "tokens_per_sec") && !strstr(csv, "mfu"));
	free(csv);
}

static const char *mlp_yaml =
	"seed_everything: 8\n"
	"trainer:\n"
	"  max_epochs: 1\n"
	"  log_every_n_steps: 2\n"
	"  enable_progress_bar: false\n"
	"  enable_checkpointing: false\n"
	"model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 8, val_fraction: 0.25}\n"
	"optimizer: {name: sgd, lr: 1.0e-2}\n";

static void mlp_two_ranks(void)
{
	const double F = 6.0 * (16 * 8 + 8 + 8 * 4 + 4); /* per sample */
	char *csv;
	int rc;

	tt_write_text(tt_path("mlp.yaml"), mlp_yaml);
	rc = tt_weft("mlp", "fit", "--config", "mlp.yaml", "--trainer.devices=2",
		     "--trainer.strategy=ddp", "--trainer.peak_flops=2.5e8",
		     "--trainer.callbacks=[{class: ThroughputMonitor}]");
	WT_REQUIRE(tt_expect_ok("mlp", rc));
	WT_STR_CONTAINS(tt_output("mlp", "err"), "per device x 2 devices (trainer.peak_flops)");
	csv = tt_read(tt_path("runs/mlp/version_0/metrics.csv"), NULL);
	WT_REQUIRE(csv);
	for (int step = 2; step <= 6; step += 2) {
		double s = tt_csv_value(csv, "samples_per_sec", step);

		WT_CHECK(s > 0);
		WT_CLOSE(tt_csv_value(csv, "mfu", step), s * F / (2 * 2.5e8), 1e-6, 0);
	}
	WT_CHECK(isnan(tt_csv_value(csv, "tokens_per_sec", 2)));
	free(csv);
}

static void bad_peak(void)
{
	int rc = tt_weft("bad", "fit", "--config", "mlp.yaml", "--trainer.peak_flops=-3");

	WT_CHECK(rc == 1);
	WT_STR_CONTAINS(tt_output("bad", "err"), "peak_flops");
	WT_STR_CONTAINS(tt_output("bad", "err"), "must be the peak FLOP/s of one device, a "
			"number > 0 (such as 989.0e12, an H100 SXM's dense bf16 peak), or null "
			"for the default; got -3");
	rc = tt_weft("bad2", "fit", "--config", "mlp.yaml", "--trainer.peak_flops=fast");
	WT_CHECK(rc == 1);
	WT_STR_CONTAINS(tt_output("bad2", "err"), "peak_flops");
	rc = tt_weft("bad3", "fit", "--config", "mlp.yaml",
		     "--trainer.callbacks={throughput_monitor: {window_size: 50}}");
	WT_CHECK(rc == 1);
	WT_STR_CONTAINS(tt_output("bad3", "err"), "throughput_monitor");
	WT_STR_CONTAINS(tt_output("bad3", "err"), "takes no options");
}

int main(void)
{
	tt_scratch("train_throughput");
	flops_of_shapes();
	cpu_peak();
	tt_make_text(20000);
	tt_make_npy_dataset(128, 16, 4); /* 96 training rows: 6 steps of 8 rows a rank on 2 */
	gpt_fit();
	mlp_two_ranks();
	bad_peak();
	tt_cleanup();
	return wt_done("test_train_throughput");
}
