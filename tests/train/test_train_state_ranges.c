/* Every field of trainer_state.json is range-checked when a run resumes:
 * a value out of range (epoch -1 crashed the sampler, global_step 2^62 was
 * taken) ends the run with exit 1 and one line naming the file, the field,
 * the value and the valid range, before any training.
 *
 * Each case is a copy of a good checkpoint whose trainer_state.json has one
 * field changed, committed through runlog/atomic_dir so its manifest
 * matches (the manifest check would otherwise refuse it first). The
 * unchanged copy resumes, so the copying itself is sound.
 */
#include "runlog/atomic_dir.h"
#include "train_test.h"

static const char *yaml =
	"seed_everything: 4\n"
	"trainer:\n"
	"  name: s\n"
	"  max_steps: 6\n"
	"  enable_progress_bar: false\n"
	"model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 32, val_fraction: 0.25}\n"
	"optimizer: {name: adamw, lr: 0.01}\n";

#define GOOD "runs/s/version_0/checkpoints/last"

/* trainer_state.json of GOOD with `"key": <old>` replaced by
 * `"key": value` (a scalar or an array), or, for a key it lacks, with
 * `extra` put after the opening brace. Free with free(). */
static char *edited_state(const char *key, const char *value, const char *extra)
{
	char *s = tt_read(tt_path(GOOD "/trainer_state.json"), NULL), *out, *at, *end;
	char pat[128];
	size_t n;

	WT_REQUIRE(s);
	n = strlen(s) + strlen(value) + (extra ? strlen(extra) : 0) + 8;
	out = malloc(n);
	WT_REQUIRE(out);
	if (extra) {
		at = strchr(s, '{') + 1;
		snprintf(out, n, "%.*s%s,%s", (int)(at - s), s, extra, at);
		free(s);
		return out;
	}
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	at = strstr(s, pat);
	WT_REQUIRE(at);
	at += strlen(pat);
	while (*at == ' ')
		at++;
	end = *at == '[' ? strchr(at, ']') + 1 : at + strcspn(at, ",\n}");
	snprintf(out, n, "%.*s%s%s", (int)(at - s), s, value, end);
	free(s);
	return out;
}

/* A checkpoint `dir` holding GOOD's weights and optimizer state and
 * `state` as trainer_state.json, with a matching manifest. */
static void make_ckpt(const char *dir, const char *state)
{
	static const char *const copied[] = { "model.safetensors", "optimizer.bin" };
	weft_atomic_dir *d = NULL;

	WT_OK(weft_atomic_dir_begin(tt_path("%s", dir), &d));
	for (size_t i = 0; i < 2; i++) {
		size_t len = 0;
		char *data = tt_read(tt_path(GOOD "/%s", copied[i]), &len);

		WT_REQUIRE(data);
		WT_OK(weft_atomic_dir_write_file(d, copied[i], data, len));
		free(data);
	}
	WT_OK(weft_atomic_dir_write_file(d, "trainer_state.json", state, strlen(state)));
	WT_OK(weft_atomic_dir_commit(d));
}

/* Resumes from a copy with `key` set to `value` (or `extra` added) and
 * expects exit 1 with one line holding the file, the field, `shown` (the
 * value as printed) and `range`. */
static void refused(const char *tag, const char *key, const char *value, const char *extra,
		    const char *shown, const char *range)
{
	char *state = edited_state(key, value, extra);
	char resume[256], want[512];
	const char *err;
	int rc;

	make_ckpt(tag, state);
	free(state);
	snprintf(resume, sizeof(resume), "--trainer.resume=%s", tag);
	rc = tt_weft(tag, "fit", "--config", "s.yaml", "--trainer.max_steps=12", resume);
	err = tt_output(tag, "err");
	wt_checks++;
	if (rc != 1) {
		wt_failures++;
		fprintf(stderr, "%s: exit status %d (expected 1, 128+N is a signal); stderr:\n%s\n",
			tag, rc, err);
	}
	snprintf(want, sizeof(want), "'%s/trainer_state.json': \"%s\" is %s; valid: %s", tag, key,
		 shown, range);
	WT_CHECK(strncmp(err, "weft: ", 6) == 0);
	WT_STR_CONTAINS(err, want);
	WT_STR_CONTAINS(err, "resume from another checkpoint");
	WT_CHECK(strchr(err, '\n') && strchr(err, '\n')[1] == '\0');
}

#define COUNT "an integer from 0 to 9007199254740992"

int main(void)
{
	char *state;
	int rc;

	tt_scratch("weft_state_ranges");
	tt_make_npy_dataset(512, 16, 4);
	tt_write_text(tt_path("s.yaml"), yaml);
	rc = tt_weft("s0", "fit", "--config", "s.yaml");
	WT_REQUIRE(tt_expect_ok("s0", rc));

	/* the unchanged copy resumes */
	state = edited_state("epoch", "0", NULL);
	make_ckpt("same", state);
	free(state);
	rc = tt_weft("same", "fit", "--config", "s.yaml", "--trainer.max_steps=12",
		     "--trainer.resume=same");
	WT_REQUIRE(tt_expect_ok("same", rc));
	WT_STR_CONTAINS(tt_output("same", "err"), "resumed from same at step 6 (epoch 0)");

	refused("epoch_neg", "epoch", "-1", NULL, "-1", COUNT);
	refused("epoch_frac", "epoch", "1.5", NULL, "1.5", COUNT);
	refused("step_huge", "global_step", "4611686018427387904", NULL, "4611686018427387904",
		COUNT);
	refused("step_neg", "global_step", "-6", NULL, "-6", COUNT);
	refused("next_neg", "next_batch", "-3", NULL, "-3", COUNT);
	refused("next_str", "next_batch", "\"6\"", NULL, "the string \"6\"", COUNT);
	refused("bad_neg", "bad_checks", "-1", NULL, "-1", COUNT);
	refused("numel_neg", "numel", "-5", NULL, "-5", COUNT);
	refused("version", "version", "2", NULL, "2", "an integer from 1 to 1");
	refused("seed_neg", "seed", "-1", NULL, "-1", "an integer from 0 to 9223372036854775807");
	refused("gb_zero", "global_batch", "0", NULL, "0", "an integer from 1 to 9007199254740992");
	refused("world_zero", "world_size", "0", NULL, "0", "an integer from 1 to 2147483647");
	refused("world_null", "world_size", "null", NULL, "null",
		"an integer from 1 to 2147483647");
	refused("best_inf", "best_score", "1e999", NULL, "inf",
		"null or a finite number from -1.79769e+308 to 1.79769e+308");
	refused("loss_str", "train_loss", "\"nan\"", NULL, "the string \"nan\"",
		"null or a finite number from -1.79769e+308 to 1.79769e+308");
	refused("strategy", "strategy", "7", NULL, "7", "a string");
	refused("slots", "optimizer_slots", "{}", NULL, "an object",
		"an array of at most 8 slot names");
	refused("scale_neg", "loss_scaler.scale", "", "\"loss_scaler\": {\"scale\": -2, "
		"\"good_steps\": 0, \"hysteresis_left\": 0, \"skipped_steps\": 0}", "-2",
		"a number above 0 and at most 3.4e38");
	refused("good_neg", "good_steps", "", "\"loss_scaler\": {\"scale\": 65536, "
		"\"good_steps\": -4, \"hysteresis_left\": 0, \"skipped_steps\": 0}", "-4", COUNT);

	tt_cleanup();
	return wt_done("test_train_state_ranges");
}
