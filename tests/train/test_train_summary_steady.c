/* summary.json's steady peaks: a GPT trained for 5 steps (single, and ddp
 * on 2 ranks over gloo; activation checkpointing none and full) writes
 * "steady_peak_bytes" (the peaks from the end of the second step on, when
 * the activation arenas have their steady size) and "steady_peak_rank"
 * beside "peak_bytes", with every steady peak at most the whole run's; its
 * "plan_bytes" has weft plan's activations, within 5% of the steady
 * activation peak (the plan's stated accuracy, test_strategy_act_plan),
 * while the whole run's activation peak (the first steps' arena growth)
 * may be up to twice it; and the trainer does not warn that plan and peak
 * differ. A run of 2 steps has no steady peak and no warning either.
 * The host/device split ("host_peak_bytes", "device_peak_bytes", their
 * ranks and "steady_" forms): on the CPU every device peak is 0 and every
 * host peak equals the total's, exactly.
 * Skipped (77) without the gloo plugin. */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "train_test.h"
#include "weft/status.h"

static const char *yaml =
	"seed_everything: 5\n"
	"trainer:\n"
	"  max_steps: 5\n"
	"  threads: 1\n"
	"  enable_progress_bar: false\n"
	"  enable_checkpointing: false\n"
	"  limit_val_batches: 1\n"
	"model: {class: gpt, n_layer: 3, n_head: 2, n_embd: 64, vocab_size: 256, block_size: 64,\n"
	"        bias: true, dropout: 0.0}\n"
	"data: {class: text, paths: [corpus.txt], block_size: 64, batch_size: 8,\n"
	"       val_fraction: 0.1}\n"
	"optimizer: {name: adamw, lr: 1.0e-3}\n";

static int64_t field(const weft_json_value *js, const char *obj, const char *key)
{
	const weft_json_value *o = weft_json_get(js, obj), *v = o ? weft_json_get(o, key) : NULL;

	WT_REQUIRE(v && v->is_integer);
	return v->integer;
}

/* No device: the device's peaks are 0 and the host's are the totals'
 * (prefix "" or "steady_"), with a rank named for each. */
static void check_split(const weft_json_value *js, const char *prefix, int world)
{
	static const char *const keys[] = { "params", "grads", "optim", "activations",
					    "comm", "other", "total" };
	char all[64], host[64], dev[64], host_rank[64], dev_rank[64];

	snprintf(all, sizeof(all), "%speak_bytes", prefix);
	snprintf(host, sizeof(host), "%shost_peak_bytes", prefix);
	snprintf(dev, sizeof(dev), "%sdevice_peak_bytes", prefix);
	snprintf(host_rank, sizeof(host_rank), "%shost_peak_rank", prefix);
	snprintf(dev_rank, sizeof(dev_rank), "%sdevice_peak_rank", prefix);
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		WT_CHECK(field(js, dev, keys[k]) == 0);
		WT_CHECK(field(js, host, keys[k]) == field(js, all, keys[k]));
		WT_CHECK(field(js, host_rank, keys[k]) >= 0 &&
			 field(js, host_rank, keys[k]) < world);
		WT_CHECK(field(js, dev_rank, keys[k]) == 0); /* a tie: the lowest */
	}
}

static void run(const char *name, const char *devices, const char *strategy, const char *mode)
{
	char a_name[64], a_dev[64], a_strat[64], a_mode[80], path[256];
	weft_json_value *js = NULL;
	int64_t steady, whole, plan;
	int rc;

	snprintf(a_name, sizeof(a_name), "--trainer.name=%s", name);
	snprintf(a_dev, sizeof(a_dev), "--trainer.devices=%s", devices);
	snprintf(a_strat, sizeof(a_strat), "--trainer.strategy=%s", strategy);
	snprintf(a_mode, sizeof(a_mode), "--trainer.activation_checkpointing=%s", mode);
	rc = tt_weft(name, "fit", "--config", "s.yaml", a_name, a_dev, a_strat, a_mode);
	WT_REQUIRE(tt_expect_ok(name, rc));
	WT_CHECK(!strstr(tt_output(name, "err"), "where weft plan predicts"));
	snprintf(path, sizeof(path), "runs/%s/version_0/summary.json", name);
	WT_REQUIRE(weft_json_parse_file(tt_path("%s", path), &js) == WEFT_OK);
	steady = field(js, "steady_peak_bytes", "activations");
	whole = field(js, "peak_bytes", "activations");
	plan = field(js, "plan_bytes", "activations");
	fprintf(stderr, "%s: activations steady %lld, whole run %lld, plan %lld (%+.2f%%)\n", name,
		(long long)steady, (long long)whole, (long long)plan,
		100.0 * (double)(plan - steady) / (double)steady);
	WT_CHECK(steady > 0 && steady <= whole);
	WT_CHECK(llabs(plan - steady) <= steady / 20);
	WT_CHECK(field(js, "steady_peak_bytes", "total") <= field(js, "peak_bytes", "total"));
	WT_CHECK(field(js, "steady_peak_rank", "total") >= 0 &&
		 field(js, "steady_peak_rank", "total") < atoi(devices));
	check_split(js, "", atoi(devices));
	check_split(js, "steady_", atoi(devices));
	weft_json_free(js);
}

int main(void)
{
	const char *pd = getenv("WEFT_PLUGIN_DIR");
	char gloo[TT_PATH], path[256];
	weft_json_value *js = NULL;
	int rc;

	snprintf(gloo, sizeof(gloo), "%s/comm_gloo.so", pd ? pd : "");
	if (!pd || !tt_exists(gloo)) {
		fprintf(stderr, "skipped: %s was not built\n", gloo);
		return 77;
	}
	tt_scratch("train_summary_steady");
	tt_make_text(200000);
	tt_write_text(tt_path("s.yaml"), yaml);
	run("single", "1", "single", "none");
	run("ddp", "2", "ddp", "none");
	run("ddp_full", "2", "ddp", "full");
	rc = tt_weft("short", "fit", "--config", "s.yaml", "--trainer.name=short",
		     "--trainer.max_steps=2");
	WT_REQUIRE(tt_expect_ok("short", rc));
	WT_CHECK(!strstr(tt_output("short", "err"), "where weft plan predicts"));
	snprintf(path, sizeof(path), "runs/short/version_0/summary.json");
	WT_REQUIRE(weft_json_parse_file(tt_path("%s", path), &js) == WEFT_OK);
	WT_CHECK(weft_json_get(js, "steady_peak_bytes") == NULL);
	WT_CHECK(weft_json_get(js, "steady_device_peak_bytes") == NULL);
	check_split(js, "", 1);
	WT_CHECK(weft_json_get(js, "peak_bytes") != NULL);
	weft_json_free(js);
	tt_cleanup();
	return wt_done("test_train_summary_steady");
}
