/* ModelCheckpoint with a monitored metric before the first validation, as
 * Lightning's: a save that comes before any validation has no score, so it
 * is skipped with one warning (checkpoints/last is still written); every
 * scored save carries the value of the newest validation at its step; and
 * save_top_k keeps exactly k of them, the best.
 *
 * Run: saves every 5 steps, validation every 10 (check_val_every_n_epoch:
 * null), max_steps 30, save_top_k 2 on val_loss. The save at step 5 is
 * skipped; steps 10..30 are scored with the validations at 10, 10, 20, 20,
 * 30; two remain, the two best of those, each with its own score in
 * trainer_state.json (monitor_score, monitor_step) equal to metrics.csv's
 * val_loss at that step.
 *
 * Also: `resume: auto` from a checkpoint whose trainer_state.json has
 * "best_score": null (early stopping had no check yet) starts early
 * stopping at +inf (mode min): with min_delta 10 and patience 1 the first
 * check after the resume improves and the second stops, at step 9.
 *
 * Tolerance: metrics.csv prints 9 significant digits, trainer_state.json
 * 17, so scores agree to relative 1e-7.
 */
#include <dirent.h>
#include <math.h>

#include "base/json.h"
#include "train_test.h"
#include "weft/status.h"

static const char *yaml =
	"seed_everything: 11\n"
	"trainer:\n"
	"  max_steps: 30\n"
	"  val_check_interval: 10\n"
	"  check_val_every_n_epoch: null\n"
	"  log_every_n_steps: 1\n"
	"  enable_progress_bar: false\n"
	"  callbacks:\n"
	"    model_checkpoint: {every_n_train_steps: 5, every_n_epochs: 0, save_top_k: 2,\n"
	"                       monitor: val_loss}\n"
	"model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 8, val_fraction: 0.25}\n"
	"optimizer: {name: sgd, lr: 5.0e-2}\n";

static double json_num(const weft_json_value *o, const char *key)
{
	const weft_json_value *v = weft_json_get(o, key);

	return v && v->kind == WEFT_JSON_NUMBER ? v->number : NAN;
}

static void topk_case(void)
{
	const char *ck = "runs/topk/version_0/checkpoints";
	double all[7]; /* the score of the save at step 5 * i */
	int kept_step[8], nkept = 0, warned = 0;
	const char *err, *p;
	char *csv;
	DIR *d;
	struct dirent *e;
	int rc;

	rc = tt_weft("topk", "fit", "--config", "topk.yaml");
	WT_REQUIRE(tt_expect_ok("topk", rc));
	err = tt_output("topk", "err");
	for (p = err; (p = strstr(p, "has no value yet")); p++)
		warned++;
	WT_CHECK(warned == 1);
	csv = tt_read(tt_path("runs/topk/version_0/metrics.csv"), NULL);
	WT_REQUIRE(csv);
	for (int i = 2; i <= 6; i++)
		all[i] = tt_csv_value(csv, "val_loss", 10 * ((5 * i) / 10));
	d = opendir(tt_path("%s", ck));
	WT_REQUIRE(d);
	while ((e = readdir(d))) {
		char file[TT_PATH];
		weft_json_value *js = NULL;
		char *text;
		long long ep, step;

		if (e->d_name[0] == '.')
			continue;
		if (!strcmp(e->d_name, "last"))
			continue;
		WT_REQUIRE(sscanf(e->d_name, "epoch=%lld-step=%lld", &ep, &step) == 2);
		WT_REQUIRE(nkept < 8);
		kept_step[nkept++] = (int)step;
		snprintf(file, sizeof(file), "%s/%s/trainer_state.json", ck, e->d_name);
		text = tt_read(tt_path("%s", file), NULL);
		WT_REQUIRE(text);
		WT_REQUIRE(weft_json_parse(file, text, strlen(text), &js) == WEFT_OK);
		/* its own score: the validation at the newest multiple of 10 */
		WT_CHECK(json_num(js, "monitor_step") == (double)(10 * (step / 10)));
		WT_CLOSE(json_num(js, "monitor_score"), tt_csv_value(csv, "val_loss", 10 * (step / 10)),
			 1e-7, 0);
		weft_json_free(js);
		free(text);
	}
	closedir(d);
	WT_CHECK(tt_exists(tt_path("%s/last/model.safetensors", ck)));
	if (nkept != 2)
		fprintf(stderr, "%d scored checkpoints remain, save_top_k is 2\n", nkept);
	WT_CHECK(nkept == 2);
	/* no save before the first validation; the two kept are the best */
	for (int i = 0; i < nkept; i++) {
		int better = 0;

		WT_CHECK(kept_step[i] >= 10);
		for (int j = 2; j <= 6; j++)
			if (all[j] < all[kept_step[i] / 5])
				better++;
		WT_CHECK(better <= 1);
	}
	free(csv);
}

static void best_null_case(void)
{
	const char *es = "--trainer.callbacks={early_stopping: {monitor: val_loss, patience: 1, "
			 "min_delta: 10.0}}";
	char *state, *s;
	int rc;

	/* 5 steps, no validation: best_score is saved as null */
	rc = tt_weft("n0", "fit", "--config", "topk.yaml", "--trainer.name=bn",
		     "--trainer.max_steps=5", "--trainer.val_check_interval=100", es);
	WT_REQUIRE(tt_expect_ok("n0", rc));
	state = tt_read(tt_path("runs/bn/version_0/checkpoints/last/trainer_state.json"), NULL);
	WT_REQUIRE(state);
	WT_STR_CONTAINS(state, "\"best_score\": null");
	free(state);
	rc = tt_weft("n1", "fit", "--config", "topk.yaml", "--trainer.name=bn",
		     "--trainer.max_steps=20", "--trainer.val_check_interval=2",
		     "--trainer.resume=auto", es);
	WT_REQUIRE(tt_expect_ok("n1", rc));
	s = tt_read(tt_path("runs/bn/version_1/summary.json"), NULL);
	WT_REQUIRE(s);
	if (!strstr(s, "\"steps\": 8,"))
		fprintf(stderr, "stderr:\n%s\n", tt_output("n1", "err"));
	WT_STR_CONTAINS(s, "\"steps\": 8,");
	free(s);
}

int main(void)
{
	tt_scratch("train_ckpt_topk");
	tt_make_npy_dataset(512, 16, 4); /* 384 training rows: 48 steps an epoch */
	tt_write_text(tt_path("topk.yaml"), yaml);
	topk_case();
	best_null_case();
	tt_cleanup();
	return wt_done("test_train_ckpt_topk");
}
