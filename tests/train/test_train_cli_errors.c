/* Bad input through `weft fit / validate`: each case asserts the exit
 * status (1), that stderr is one line starting with "weft: ", and the
 * message's content (what, where, what to do):
 *   - a missing dataset names the path and the Debian package;
 *   - a truncated optimizer.bin / model.safetensors names the file and the
 *     size check against the manifest;
 *   - a flipped byte names the file and the sha256 check;
 *   - a checkpoint of a different model names the first mismatched tensor
 *     and both shapes;
 *   - an unknown config key gives file:line:col and a "did you mean";
 *   - --trainer.resume=<a directory without a checkpoint> says where the
 *     checkpoints are; a missing one says it is not a directory;
 *   - resume: auto with nothing to resume prints a notice and starts fresh
 *     (exit 0), and a failed resume leaves no empty run directory;
 *   - weft test on data without a test split says so and refuses.
 */
#include "train_test.h"

static const char *mlp_yaml =
	"seed_everything: 1\n"
	"trainer:\n"
	"  max_steps: 6\n"
	"  enable_progress_bar: false\n"
	"model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 32, val_fraction: 0.25}\n"
	"optimizer: {name: adamw, lr: 0.01}\n"; /* two slots: optimizer.bin is not empty */

/* Checks a failed run: exit 1, one stderr line "weft: ...", each of the
 * NULL-terminated substrings in it. */
static void expect_error(const char *tag, int rc, ...)
{
	const char *err = tt_output(tag, "err");
	const char *nl = strchr(err, '\n');
	va_list ap;

	wt_checks += 3;
	if (rc != 1) {
		wt_failures++;
		fprintf(stderr, "%s: exit status %d, expected 1; stderr:\n%s\n", tag, rc, err);
	}
	if (strncmp(err, "weft: ", 6) != 0) {
		wt_failures++;
		fprintf(stderr, "%s: stderr does not start with 'weft: ':\n%s\n", tag, err);
	}
	if (!nl || nl[1] != '\0') {
		wt_failures++;
		fprintf(stderr, "%s: stderr is not exactly one line:\n%s\n", tag, err);
	}
	va_start(ap, rc);
	for (const char *s; (s = va_arg(ap, const char *));) {
		wt_checks++;
		if (!strstr(err, s)) {
			wt_failures++;
			fprintf(stderr, "%s: message lacks '%s':\n%s\n", tag, s, err);
		}
	}
	va_end(ap);
}

static void copy_dir(const char *from, const char *to)
{
	static const char *const files[] = { "model.safetensors", "optimizer.bin",
					     "trainer_state.json", "manifest.json" };
	char a[TT_PATH], b[TT_PATH];

	WT_REQUIRE(mkdir(to, 0777) == 0);
	for (size_t i = 0; i < 4; i++) {
		size_t len = 0;
		char *data;

		snprintf(a, sizeof(a), "%s/%s", from, files[i]);
		snprintf(b, sizeof(b), "%s/%s", to, files[i]);
		data = tt_read(a, &len);
		WT_REQUIRE(data);
		tt_write(b, data, len);
		free(data);
	}
}

static void truncate_to(const char *path, off_t len)
{
	WT_REQUIRE(truncate(path, len) == 0);
}

static void flip_byte(const char *path, long at)
{
	size_t len = 0;
	char *data = tt_read(path, &len);

	WT_REQUIRE(data && (size_t)at < len);
	data[at] ^= 0x5a;
	tt_write(path, data, len);
	free(data);
}

int main(void)
{
	char good[TT_PATH];
	int rc;

	tt_scratch("weft_train_errors");
	tt_make_npy_dataset(256, 16, 4);
	tt_write_text(tt_path("mlp.yaml"), mlp_yaml);

	/* resume: auto with no earlier run: a notice, then a fresh run */
	rc = tt_weft("fresh", "fit", "--config", "mlp.yaml", "--trainer.resume=auto");
	WT_REQUIRE(tt_expect_ok("fresh", rc));
	WT_STR_CONTAINS(tt_output("fresh", "err"), "resume: auto found no checkpoint under "
						   "runs/mlp; starting fresh");
	WT_CHECK(tt_exists(tt_path("runs/mlp/version_0/checkpoints/last/manifest.json")));
	snprintf(good, sizeof(good), "%s", tt_path("runs/mlp/version_0/checkpoints/last"));

	/* missing dataset (the path is in the YAML: file:line:col too) */
	tt_write_text(tt_path("fm.yaml"),
		      "trainer: {max_steps: 1}\n"
		      "model: {class: mlp, hidden: [8]}\n"
		      "data:\n"
		      "  class: fashion_mnist\n"
		      "  path: /nonexistent/fashion-mnist\n"
		      "optimizer: {name: sgd, lr: 0.1}\n");
	rc = tt_weft("nodata", "fit", "--config", "fm.yaml");
	expect_error("nodata", rc, "fm.yaml:5:9", "/nonexistent/fashion-mnist/",
		     "dataset-fashion-mnist", "data.path", (const char *)NULL);

	/* unknown key, in the file */
	tt_write_text(tt_path("typo.yaml"),
		      "trainer:\n"
		      "  max_step: 5\n"
		      "model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
		      "data: {class: npy, x: x.npy, y: y.npy, val_fraction: 0.25}\n"
		      "optimizer: {name: sgd, lr: 0.1}\n");
	rc = tt_weft("typo", "fit", "--config", "typo.yaml");
	expect_error("typo", rc, "typo.yaml:2:3", "unknown key 'max_step' in 'trainer'",
		     "did you mean 'max_steps'?", (const char *)NULL);

	/* truncated optimizer.bin and model.safetensors: the manifest's size */
	copy_dir(good, tt_path("trunc_opt"));
	truncate_to(tt_path("trunc_opt/optimizer.bin"), 100);
	rc = tt_weft("trunc_opt", "fit", "--config", "mlp.yaml", "--trainer.resume=trunc_opt");
	expect_error("trunc_opt", rc, "trunc_opt/optimizer.bin", "size 100 bytes, manifest says",
		     "truncated", (const char *)NULL);
	WT_CHECK(!strstr(tt_output("trunc_opt", "err"), "manifest says 0 "));
	copy_dir(good, tt_path("trunc_model"));
	truncate_to(tt_path("trunc_model/model.safetensors"), 64);
	rc = tt_weft("trunc_model", "validate", "--config", "mlp.yaml", "--ckpt", "trunc_model");
	expect_error("trunc_model", rc, "trunc_model/model.safetensors",
		     "size 64 bytes, manifest says", (const char *)NULL);

	/* a flipped byte in the weights: sha256 */
	copy_dir(good, tt_path("flipped"));
	flip_byte(tt_path("flipped/model.safetensors"), 300);
	rc = tt_weft("flipped", "fit", "--config", "mlp.yaml", "--trainer.resume=flipped");
	expect_error("flipped", rc, "flipped/model.safetensors", "sha256",
		     "manifest says", (const char *)NULL);

	/* a different model: the first mismatched tensor, both shapes */
	rc = tt_weft("other", "validate", "--config", "mlp.yaml", "--ckpt", good,
		     "--model.hidden=[64]");
	expect_error("other", rc, "does not fit this model", "'layers.0.weight'", "[8, 16]",
		     "[64, 16]", (const char *)NULL);

	/* resume from a directory that is not a checkpoint */
	rc = tt_weft("rundir", "fit", "--config", "mlp.yaml",
		     "--trainer.resume=runs/mlp/version_0");
	expect_error("rundir", rc, "'runs/mlp/version_0' is a run directory, not a checkpoint",
		     "runs/mlp/version_0/checkpoints/last", (const char *)NULL);
	WT_REQUIRE(mkdir(tt_path("empty"), 0777) == 0);
	rc = tt_weft("empty", "fit", "--config", "mlp.yaml", "--trainer.resume=empty");
	expect_error("empty", rc, "'empty' holds no checkpoint (no manifest.json)",
		     "trainer.resume: auto", (const char *)NULL);
	rc = tt_weft("missing", "fit", "--config", "mlp.yaml", "--trainer.resume=nowhere");
	expect_error("missing", rc, "checkpoint 'nowhere' is not a directory", (const char *)NULL);

	/* none of the failed resumes made a run directory */
	WT_CHECK(!tt_exists(tt_path("runs/mlp/version_1")));

	/* weft test without a test split (npy with val_fraction) refuses
	 * instead of scoring the validation split as "test" */
	rc = tt_weft("notest", "test", "--config", "mlp.yaml", "--ckpt", good);
	expect_error("notest", rc, "weft test: data 'npy' has no test split",
		     "`weft validate`", (const char *)NULL);
	WT_CHECK(!strstr(tt_output("notest", "out"), "test_loss"));

	/* and the good checkpoint still validates */
	rc = tt_weft("good", "validate", "--config", "mlp.yaml", "--ckpt", good);
	WT_CHECK(tt_expect_ok("good", rc));
	WT_STR_CONTAINS(tt_output("good", "out"), "val_loss ");
	WT_STR_CONTAINS(tt_output("good", "out"), "val_acc ");
	tt_cleanup();
	return wt_done("test_train_cli_errors");
}
