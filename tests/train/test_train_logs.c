/* A run's logs and files read back: the TensorBoard events file is parsed by
 * core/runlog's reader (both CRCs of every record checked, each Event
 * decoded), and must hold train_loss / lr at exactly the logged steps
 * (step 1 and every log_every_n_steps) and val_loss / val_acc at each
 * epoch's end, with the values metrics.csv and summary.json hold.
 *
 * Also: with the default save_top_k 1 and no monitor, only the newest
 * save is kept besides checkpoints/last (Lightning's behaviour).
 *
 * Tolerance: TensorBoard stores float32, metrics.csv prints 9 significant
 * digits and summary.json 17, so values agree to float32 rounding:
 * relative 1e-6 (float32's unit roundoff is 6e-8).
 */
#include <dirent.h>

#include "base/json.h"
#include "runlog/tb_events.h"
#include "train_test.h"
#include "weft/status.h"

static const char *mlp_yaml =
	"seed_everything: 5\n"
	"trainer:\n"
	"  max_epochs: 2\n"
	"  log_every_n_steps: 5\n"
	"  enable_progress_bar: false\n"
	"model: {class: mlp, in_features: 16, hidden: [16], out_features: 4}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 32, val_fraction: 0.25}\n"
	"optimizer: {name: adamw, lr: 1.0e-2}\n";

#define MAX_EV 256

typedef struct seen {
	int n;
	char tag[MAX_EV][64];
	int64_t step[MAX_EV];
	float value[MAX_EV];
	int version_records;
	double last_wall;
	int wall_ok;
} seen;

static int on_event(void *ctx, const weft_tb_event *ev)
{
	seen *s = ctx;

	if (!ev->has_value) {
		if (!strcmp(ev->file_version, "brain.Event:2"))
			s->version_records++;
		return 0;
	}
	/* wall times are seconds since the epoch and never go backwards */
	if (ev->wall_time < 1.6e9 || ev->wall_time < s->last_wall)
		s->wall_ok = 0;
	s->last_wall = ev->wall_time;
	if (s->n < MAX_EV && ev->has_simple_value) {
		snprintf(s->tag[s->n], sizeof(s->tag[0]), "%s", ev->tag);
		s->step[s->n] = ev->step;
		s->value[s->n] = ev->simple_value;
		s->n++;
	}
	return 0;
}

/* The value logged for (tag, step); NAN when absent; counts duplicates. */
static double tb_value(const seen *s, const char *tag, int64_t step, int *count)
{
	double v = NAN;

	*count = 0;
	for (int i = 0; i < s->n; i++) {
		if (s->step[i] == step && !strcmp(s->tag[i], tag)) {
			v = s->value[i];
			(*count)++;
		}
	}
	return v;
}

static void find_events_file(char *out, size_t len)
{
	DIR *d = opendir(tt_path("runs/logs/version_0"));
	struct dirent *e;

	out[0] = '\0';
	WT_REQUIRE(d);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "events.out.tfevents.", 20))
			snprintf(out, len, "%s", tt_path("runs/logs/version_0/%s", e->d_name));
	closedir(d);
	WT_REQUIRE(out[0]);
}

/* The entries of runs/logs/version_0/checkpoints, sorted, joined by ' '. */
static void list_checkpoints(char *out, size_t len)
{
	struct dirent **ents = NULL;
	int n = scandir(tt_path("runs/logs/version_0/checkpoints"), &ents, NULL, alphasort);

	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (ents[i]->d_name[0] != '.') {
			size_t l = strlen(out);

			snprintf(out + l, len - l, "%s%s", l ? " " : "", ents[i]->d_name);
		}
		free(ents[i]);
	}
	free(ents);
}

int main(void)
{
	seen s = { .wall_ok = 1 };
	char ev_path[TT_PATH];
	weft_json_value *sum = NULL;
	const weft_json_value *fm;
	char *csv;
	int rc, count;
	/* 192 training rows / 32 = 6 steps per epoch, 2 epochs */
	const int64_t train_steps[] = { 1, 5, 10 };
	const int64_t val_steps[] = { 6, 12 };

	tt_scratch("weft_train_logs");
	tt_make_npy_dataset(256, 16, 4);
	tt_write_text(tt_path("logs.yaml"), mlp_yaml);
	rc = tt_weft("fit", "fit", "--config", "logs.yaml");
	WT_REQUIRE(tt_expect_ok("fit", rc));

	find_events_file(ev_path, sizeof(ev_path));
	WT_OK(weft_tb_read_file(ev_path, on_event, &s));
	WT_CHECK(s.version_records == 1);
	WT_CHECK(s.wall_ok);
	csv = tt_read(tt_path("runs/logs/version_0/metrics.csv"), NULL);
	WT_REQUIRE(csv);
	for (size_t i = 0; i < sizeof(train_steps) / sizeof(train_steps[0]); i++) {
		double v = tb_value(&s, "train_loss", train_steps[i], &count);

		WT_CHECK(count == 1);
		WT_CHECK(isfinite(v) && v > 0);
		WT_CLOSE(v, tt_csv_value(csv, "train_loss", train_steps[i]), 1e-6, 0);
		tb_value(&s, "lr", train_steps[i], &count);
		WT_CHECK(count == 1);
	}
	/* nothing logged between the logging steps */
	for (int64_t step = 2; step <= 12; step++) {
		if (step == 5 || step == 10)
			continue;
		tb_value(&s, "train_loss", step, &count);
		WT_CHECK(count == 0);
	}
	for (size_t i = 0; i < 2; i++) {
		double v = tb_value(&s, "val_loss", val_steps[i], &count);
		double a;

		WT_CHECK(count == 1);
		WT_CLOSE(v, tt_csv_value(csv, "val_loss", val_steps[i]), 1e-6, 0);
		a = tb_value(&s, "val_acc", val_steps[i], &count);
		WT_CHECK(count == 1);
		WT_CHECK(a >= 0 && a <= 1);
	}
	/* the last validation is summary.json's */
	WT_OK(weft_json_parse_file(tt_path("runs/logs/version_0/summary.json"), &sum));
	fm = weft_json_get(sum, "final_metrics");
	WT_REQUIRE(fm && weft_json_get(fm, "val_loss") && weft_json_get(fm, "val_acc"));
	WT_CLOSE(tb_value(&s, "val_loss", 12, &count), weft_json_get(fm, "val_loss")->number,
		 1e-6, 0);
	WT_CLOSE(tb_value(&s, "val_acc", 12, &count), weft_json_get(fm, "val_acc")->number,
		 1e-6, 0);
	WT_CHECK(weft_json_get(sum, "steps") && weft_json_get(sum, "steps")->integer == 12);
	{
		char names[512];

		list_checkpoints(names, sizeof(names));
		WT_CHECK(!strcmp(names, "epoch=1-step=12 last"));
		if (strcmp(names, "epoch=1-step=12 last"))
			fprintf(stderr, "checkpoints: %s\n", names);
	}
	weft_json_free(sum);
	free(csv);

	/* the reader really checks: one flipped byte in a record's payload
	 * fails the data CRC */
	{
		size_t len = 0;
		char *raw = tt_read(ev_path, &len);

		WT_REQUIRE(raw && len > 100);
		raw[len - 8] ^= 0x01; /* inside the last record's data */
		tt_write(tt_path("damaged.tfevents"), raw, len);
		free(raw);
		s = (seen){ .wall_ok = 1 };
		WT_FAILS(weft_tb_read_file(tt_path("damaged.tfevents"), on_event, &s),
			 WEFT_ERR_CORRUPT, "damaged.tfevents", "CRC");
	}
	tt_cleanup();
	return wt_done("test_train_logs");
}
