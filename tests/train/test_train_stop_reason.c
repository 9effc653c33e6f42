/* The end of `weft fit` as Lightning ends it: the progress display's final
 * state is printed even when training stops inside an epoch, and the last
 * line says why training stopped.
 *
 * 1. max_steps 25 in epochs of 48 steps, plain progress lines every 10
 *    steps: the display's last line is "Epoch 0: 25/48", followed by
 *    "`Trainer.fit` stopped: `max_steps=25` reached."
 * 2. max_epochs 1: "`Trainer.fit` stopped: `max_epochs=1` reached." after
 *    the epoch's final line "Epoch 0: 48/48".
 * (Early stopping's line is checked in test_train_early_stop.)
 * No tolerance: the lines are exact.
 */
#include "train_test.h"

static const char *yaml =
	"seed_everything: 2\n"
	"trainer:\n"
	"  log_every_n_steps: 10\n"
	"  enable_progress_bar: false\n"
	"  enable_checkpointing: false\n"
	"model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 8, val_fraction: 0.25}\n"
	"optimizer: {name: sgd, lr: 1.0e-2}\n";

/* The last line of `err` that starts with "Epoch ", into out. */
static void last_epoch_line(const char *err, char *out, size_t len)
{
	const char *p = err, *hit = NULL;

	out[0] = '\0';
	while ((p = strstr(p, "Epoch "))) {
		if (p == err || p[-1] == '\n' || p[-1] == '\r')
			hit = p;
		p++;
	}
	if (hit) {
		size_t n = strcspn(hit, "\r\n");

		snprintf(out, len, "%.*s", (int)n, hit);
	}
}

static void check_end(const char *tag, const char *want_line, const char *want_reason)
{
	const char *err = tt_output(tag, "err");
	const char *reason = strstr(err, want_reason);
	char line[256];

	last_epoch_line(err, line, sizeof(line));
	if (strncmp(line, want_line, strlen(want_line)) != 0)
		fprintf(stderr, "%s: the last progress line is '%s', expected '%s...'\n", tag, line,
			want_line);
	WT_CHECK(strncmp(line, want_line, strlen(want_line)) == 0);
	WT_STR_CONTAINS(err, want_reason);
	/* the reason is the run's last line */
	WT_CHECK(reason && reason[strlen(want_reason)] == '\n' &&
		 reason[strlen(want_reason) + 1] == '\0');
}

int main(void)
{
	int rc;

	tt_scratch("train_stop_reason");
	tt_make_npy_dataset(512, 16, 4); /* 384 training rows: 48 steps an epoch */
	tt_write_text(tt_path("stop.yaml"), yaml);
	rc = tt_weft("steps", "fit", "--config", "stop.yaml", "--trainer.max_steps=25");
	WT_REQUIRE(tt_expect_ok("steps", rc));
	check_end("steps", "Epoch 0: 25/48 ", "`Trainer.fit` stopped: `max_steps=25` reached.");
	rc = tt_weft("epochs", "fit", "--config", "stop.yaml", "--trainer.max_epochs=1");
	WT_REQUIRE(tt_expect_ok("epochs", rc));
	check_end("epochs", "Epoch 0: 48/48 ", "`Trainer.fit` stopped: `max_epochs=1` reached.");
	tt_cleanup();
	return wt_done("test_train_stop_reason");
}
