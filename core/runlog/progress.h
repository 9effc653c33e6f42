/* runlog/progress.h - the progress display of `weft fit`.
 *
 * On a terminal (rank 0, stderr a TTY) a bar redrawn in place with a
 * carriage return, Lightning/tqdm style:
 *   Epoch 2:  45%|█████████▏          | 422/938 [00:05<00:06, 80.12it/s, loss=0.512,
 *   tokens/s=12345, mfu=0.3125]
 * Elsewhere (a log file, a batch job) plain lines, one every `log_every`
 * steps and one at the end of each epoch:
 *   Epoch 2: 422/938 (45%) [00:05<00:06, 80.12it/s] loss=0.512 tokens/s=12345
 * it/s is the mean over the steps done in this epoch since it started (or
 * resumed); ETA is the remaining steps at that rate. Metric values have 4
 * significant digits, those of 10^4 and above are whole numbers.
 * Updates never allocate.
 */
#ifndef WEFT_RUNLOG_PROGRESS_H
#define WEFT_RUNLOG_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runlog/metric.h"
#include "weft/status.h"

#define WEFT_PROGRESS_LINE 512

typedef struct weft_progress_opts {
	FILE *out;           /* stderr when NULL */
	int tty;             /* 1 bar, 0 plain lines, -1 detect with isatty() */
	int enabled;         /* 0: print nothing (ranks other than 0) */
	double refresh_s;    /* bar redraw interval; 0 means 0.1 s */
	int64_t log_every;   /* plain mode: a line every N steps; 0 means 50 */
	double (*clock)(void); /* seconds, monotonic; NULL: CLOCK_MONOTONIC */
} weft_progress_opts;

typedef struct weft_progress {
	weft_progress_opts o;
	int64_t epoch;
	int64_t total;        /* steps in the epoch; <= 0 unknown */
	int64_t first_step;   /* step the epoch (re)started at */
	int64_t step;         /* steps completed so far */
	double t_start;
	double t_last_draw;
	int64_t last_logged;  /* plain mode: step of the last line */
	int drawn;            /* a bar line is on screen (needs a newline) */
	char line[WEFT_PROGRESS_LINE];
} weft_progress;

/* Sets up a display from options (copied). Never fails. */
void weft_progress_init(weft_progress *p, const weft_progress_opts *o);

/* Starts (or resumes, first_step > 0) an epoch of `total` steps. */
void weft_progress_start_epoch(weft_progress *p, int64_t epoch, int64_t total,
			       int64_t first_step);

/* Reports that `step` steps of the epoch are done, with the metrics to show
 * (names borrowed for the call). Draws when the refresh interval passed
 * (bar) or on every log_every-th step (plain). */
void weft_progress_update(weft_progress *p, int64_t step, const weft_metric *m, size_t n);

/* Ends the epoch: draws the final state with these metrics (validation
 * metrics included) and moves to a new line. */
void weft_progress_end_epoch(weft_progress *p, const weft_metric *m, size_t n);

/* Formats the current state into p->line and returns it (what the next
 * draw would print, without the carriage return); for tests and logs. */
const char *weft_progress_format(weft_progress *p, const weft_metric *m, size_t n, double now);

/* "mm:ss" or "h:mm:ss" for seconds >= 0, "?" otherwise, into buf. */
const char *weft_format_duration(double seconds, char *buf, size_t len);

#endif /* WEFT_RUNLOG_PROGRESS_H */
