/* trainer.activation_checkpointing through `weft fit` (core/tensor's
 * checkpoint.c, core/nn/gpt.c):
 *   equiv STRATEGY  a GPT with dropout 0.1 trained 4 steps with none, full
 *                   and selective: every step's train_loss equal (==) and
 *                   the final model.safetensors and optimizer state equal
 *                   byte for byte (tolerance 0: the recompute replays the
 *                   same ops on the same inputs with the same dropout
 *                   masks). STRATEGY: single, ddp, zero_1, zero_2, zero_3
 *                   (2 ranks), tp (size 2), pp (2 stages, 1f1b, 2
 *                   micro-batches), hybrid (dp 2 x pp 2, zero_1).
 *   peak            a 6-layer GPT (n_embd 64, T 64, batch 8) on one
 *                   process: the "activations" peak
 *                   in summary.json (the allocator's accounting) with full
 *                   is at most 40% of the one with none (the "falls
 *                   by at least 60%").
 *   errors          full on an mlp, a misspelt mode, and DeepSpeed's
 *                   partition_activations: true each end in one message
 *                   saying what and where.
 * Multi-rank cases skip (77) without the gloo plugin.
 */
#include "base/json.h"
#include "train_test.h"
#include "weft/status.h"

static const char *gpt_yaml =
	"seed_everything: 11\n"
	"trainer:\n"
	"  max_steps: 4\n"
	"  enable_progress_bar: false\n"
	"  log_every_n_steps: 1\n"
	"  num_sanity_val_steps: 0\n"
	"  limit_val_batches: 2\n"
	"  threads: 1\n"
	"model: {class: gpt, n_layer: %d, n_head: 2, n_embd: %d, vocab_size: 256,\n"
	"        block_size: %d, bias: true, dropout: 0.1}\n"
	"data: {class: text, paths: [corpus.txt], block_size: %d, batch_size: %d,\n"
	"       val_fraction: 0.1}\n"
	"optimizer: {name: adamw, lr: 1.0e-3}\n";

static const char *const modes[] = { "none", "full", "selective" };

typedef struct strat {
	const char *tag, *devices, *strategy, *accumulate;
} strat;

static const strat strats[] = {
	{ "single", "1", "single", "1" },
	{ "ddp", "2", "ddp", "1" },
	{ "zero_1", "2", "zero_1", "1" },
	{ "zero_2", "2", "zero_2", "1" },
	{ "zero_3", "2", "zero_3", "1" },
	{ "tp", "2", "{name: tp, size: 2}", "1" },
	{ "pp", "2", "{name: pp, schedule: 1f1b}", "2" },
	{ "hybrid", "4", "{name: hybrid, dp: 2, pp: 2, dp_strategy: zero_1}", "2" },
};

static void write_config(int n_layer, int n_embd, int T, int batch)
{
	char y[2048];

	snprintf(y, sizeof(y), gpt_yaml, n_layer, n_embd, T, T, batch);
	tt_write_text(tt_path("g.yaml"), y);
	tt_make_text(64 << 10);
}

static int run(const char *name, const strat *s, const char *mode)
{
	char a_name[128], a_dev[64], a_strat[160], a_acc[96], a_mode[96];

	snprintf(a_name, sizeof(a_name), "--trainer.name=%s", name);
	snprintf(a_dev, sizeof(a_dev), "--trainer.devices=%s", s->devices);
	snprintf(a_strat, sizeof(a_strat), "--trainer.strategy=%s", s->strategy);
	snprintf(a_acc, sizeof(a_acc), "--trainer.accumulate_grad_batches=%s", s->accumulate);
	snprintf(a_mode, sizeof(a_mode), "--trainer.activation_checkpointing=%s", mode);
	return tt_expect_ok(name, tt_weft(name, "fit", "--config", "g.yaml", a_name, a_dev,
					  a_strat, a_acc, a_mode));
}

static int equiv(const char *tag)
{
	const char *pd = getenv("WEFT_PLUGIN_DIR");
	const strat *s = NULL;
	char gloo[TT_PATH], *base_csv = NULL;

	for (size_t i = 0; i < sizeof(strats) / sizeof(strats[0]); i++)
		if (!strcmp(strats[i].tag, tag))
			s = &strats[i];
	if (!s) {
		fprintf(stderr, "unknown strategy case '%s'\n", tag);
		return 2;
	}
	snprintf(gloo, sizeof(gloo), "%s/comm_gloo.so", pd ? pd : "");
	if (strcmp(s->devices, "1") && (!pd || !tt_exists(gloo))) {
		fprintf(stderr, "skipped: %s was not built\n", gloo);
		return 77;
	}
	tt_scratch(tag);
	write_config(2, 32, 32, 4);
	for (int m = 0; m < 3; m++) {
		char name[64];

		snprintf(name, sizeof(name), "%s_%s", tag, modes[m]);
		WT_REQUIRE(run(name, s, modes[m]));
	}
	base_csv = tt_read(tt_path("runs/%s_none/version_0/metrics.csv", tag), NULL);
	WT_REQUIRE(base_csv);
	for (int m = 1; m < 3; m++) {
		char *csv = tt_read(tt_path("runs/%s_%s/version_0/metrics.csv", tag, modes[m]), NULL);
		const char *files[] = { "model.safetensors", "optimizer.bin" };

		WT_REQUIRE(csv);
		for (int64_t step = 1; step <= 4; step++) {
			double a = tt_csv_value(base_csv, "train_loss", step);
			double b = tt_csv_value(csv, "train_loss", step);

			WT_CHECK(a == b && a > 0);
			if (a != b)
				fprintf(stderr, "%s: step %lld train_loss %.9g (none) vs %.9g (%s)\n",
					tag, (long long)step, a, b, modes[m]);
		}
		for (int f = 0; f < 2; f++) {
			char a[TT_PATH], b[TT_PATH];

			snprintf(a, sizeof(a), "%s",
				 tt_path("runs/%s_none/version_0/checkpoints/last/%s", tag, files[f]));
			snprintf(b, sizeof(b), "%s",
				 tt_path("runs/%s_%s/version_0/checkpoints/last/%s", tag, modes[m],
					 files[f]));
			WT_CHECK(tt_same_file(a, b));
		}
		free(csv);
	}
	free(base_csv);
	tt_cleanup();
	return wt_done("test_train_act_ckpt equiv");
}

static int64_t activations_peak(const char *name)
{
	weft_json_value *js = NULL;
	const weft_json_value *v;
	int64_t bytes = -1;

	WT_REQUIRE(weft_json_parse_file(tt_path("runs/%s/version_0/summary.json", name), &js) ==
		   WEFT_OK);
	v = weft_json_get(weft_json_get(js, "peak_bytes"), "activations");
	if (v && v->kind == WEFT_JSON_NUMBER)
		bytes = v->integer;
	weft_json_free(js);
	return bytes;
}

static int peak(void)
{
	int64_t none, full;

	tt_scratch("act_ckpt_peak");
	write_config(6, 64, 64, 8);
	WT_REQUIRE(run("p_none", &strats[0], "none"));
	WT_REQUIRE(run("p_full", &strats[0], "full"));
	none = activations_peak("p_none");
	full = activations_peak("p_full");
	fprintf(stderr, "activations peak of a 6-layer GPT: none %lld B, full %lld B (%.1f%% "
		"lower)\n", (long long)none, (long long)full,
		none > 0 ? 100.0 * (double)(none - full) / (double)none : 0.0);
	WT_CHECK(none > 0 && full > 0);
	WT_CHECK((double)full <= 0.4 * (double)none);
	tt_cleanup();
	return wt_done("test_train_act_ckpt peak");
}

/* A failed run: exit 1 and each NULL-terminated substring in its stderr. */
static void expect_error(const char *tag, int rc, ...)
{
	const char *err = tt_output(tag, "err");
	va_list ap;

	WT_CHECK(rc == 1);
	va_start(ap, rc);
	for (const char *s; (s = va_arg(ap, const char *));) {
		WT_CHECK(strstr(err, s) != NULL);
		if (!strstr(err, s))
			fprintf(stderr, "%s: message lacks '%s':\n%s\n", tag, s, err);
	}
	va_end(ap);
}

static int errors(void)
{
	int rc;

	tt_scratch("act_ckpt_errors");
	write_config(2, 32, 32, 4);
	tt_make_npy_dataset(64, 16, 4);
	tt_write_text(tt_path("m.yaml"),
		      "trainer:\n"
		      "  max_steps: 1\n"
		      "  activation_checkpointing: full\n"
		      "model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
		      "data: {class: npy, x: x.npy, y: y.npy, batch_size: 8}\n"
		      "optimizer: {name: adamw, lr: 0.01}\n");
	rc = tt_weft("mlp", "fit", "--config", "m.yaml");
	expect_error("mlp", rc, "m.yaml:3:", "activation checkpointing 'full' recomputes "
		     "transformer blocks", "class mlp has none", NULL);
	rc = tt_weft("typo", "fit", "--config", "g.yaml", "--trainer.activation_checkpointing=ful");
	expect_error("typo", rc, "activation_checkpointing", "none", "full", "selective", NULL);
	tt_write_text(tt_path("ds.json"), "{\"train_micro_batch_size_per_gpu\": 4,\n"
		      " \"activation_checkpointing\": {\"partition_activations\": true}}\n");
	rc = tt_weft("ds", "fit", "--config", "g.yaml", "--deepspeed", "ds.json");
	expect_error("ds", rc, "ds.json:2:", "activation_checkpointing.partition_activations",
		     "is not implemented by weft", "set it to false", NULL);
	/* the block alone is trainer.activation_checkpointing: full */
	tt_write_text(tt_path("ds2.json"), "{\"train_micro_batch_size_per_gpu\": 4,\n"
		      " \"activation_checkpointing\": {\"partition_activations\": false}}\n");
	rc = tt_weft("ds2", "fit", "--config", "g.yaml", "--deepspeed", "ds2.json",
		     "--print-config");
	WT_CHECK(tt_expect_ok("ds2", rc));
	WT_CHECK(strstr(tt_output("ds2", "out"), "activation_checkpointing: full") != NULL);
	tt_cleanup();
	return wt_done("test_train_act_ckpt errors");
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "equiv"))
		return equiv(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "peak"))
		return peak();
	if (argc == 2 && !strcmp(argv[1], "errors"))
		return errors();
	fprintf(stderr, "usage: test_train_act_ckpt equiv STRATEGY | peak | errors\n");
	return 2;
}
