/* The progress bar and the plain periodic lines. */
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runlog/progress.h"

#define BAR_CELLS 20

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now(const weft_progress *p)
{
	return p->o.clock ? p->o.clock() : mono_now();
}

void weft_progress_init(weft_progress *p, const weft_progress_opts *o)
{
	memset(p, 0, sizeof(*p));
	p->o = *o;
	if (!p->o.out)
		p->o.out = stderr;
	if (p->o.tty < 0)
		p->o.tty = isatty(fileno(p->o.out)) ? 1 : 0;
	if (p->o.refresh_s <= 0)
		p->o.refresh_s = 0.1;
	if (p->o.log_every <= 0)
		p->o.log_every = 50;
}

void weft_progress_start_epoch(weft_progress *p, int64_t epoch, int64_t total, int64_t first_step)
{
	p->epoch = epoch;
	p->total = total;
	p->first_step = first_step;
	p->step = first_step;
	p->t_start = now(p);
	p->t_last_draw = -1e300;
	p->last_logged = first_step;
	p->drawn = 0;
}

const char *weft_format_duration(double s, char *buf, size_t len)
{
	long long t;

	if (!(s >= 0) || s > 1e9) {
		snprintf(buf, len, "?");
		return buf;
	}
	t = (long long)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, len, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, len, "%02lld:%02lld", t / 60, t % 60);
	return buf;
}

/* Appends to p->line, never past its end. */
static void add(weft_progress *p, size_t *pos, const char *fmt, ...) WEFT_PRINTF(3, 4);
static void add(weft_progress *p, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*pos >= sizeof(p->line) - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(p->line + *pos, sizeof(p->line) - *pos, fmt, ap);
	va_end(ap);
	if (n > 0)
		*pos += (size_t)n;
	if (*pos > sizeof(p->line) - 1)
		*pos = sizeof(p->line) - 1;
}

static void add_bar(weft_progress *p, size_t *pos, double frac)
{
	/* Eighth blocks, U+2588 (full) down to U+258F (one eighth). */
	static const char *const eighths[8] = { "", "\u258f", "\u258e", "\u258d",
						"\u258c", "\u258b", "\u258a", "\u2589" };
	int units = (int)(frac * BAR_CELLS * 8), full = units / 8, rem = units % 8;
	int cells = 0;

	for (; cells < full && cells < BAR_CELLS; cells++)
		add(p, pos, "\u2588");
	if (cells < BAR_CELLS && rem) {
		add(p, pos, "%s", eighths[rem]);
		cells++;
	}
	for (; cells < BAR_CELLS; cells++)
		add(p, pos, " ");
}

/* A metric's value: 4 significant digits, but a count per second such as
 * tokens/s (10^4 and above) in whole units, not in e-notation. */
static void add_value(weft_progress *p, size_t *pos, double v)
{
	if (fabs(v) >= 1e4 && fabs(v) < 1e15)
		add(p, pos, "%.0f", v);
	else
		add(p, pos, "%.4g", v);
}

const char *weft_progress_format(weft_progress *p, const weft_metric *m, size_t n, double t)
{
	double elapsed = t - p->t_start, rate = 0, frac = 0, eta = -1;
	int64_t done = p->step - p->first_step;
	char el[24], rem[24], speed[32];
	size_t pos = 0;

	if (elapsed > 0 && done > 0)
		rate = (double)done / elapsed;
	if (p->total > 0) {
		frac = (double)p->step / (double)p->total;
		if (frac > 1)
			frac = 1;
		if (rate > 0)
			eta = (double)(p->total - p->step) / rate;
		if (p->step >= p->total)
			eta = 0;
	}
	if (rate <= 0)
		snprintf(speed, sizeof(speed), "?it/s");
	else if (rate < 1)
		snprintf(speed, sizeof(speed), "%.2fs/it", 1.0 / rate);
	else
		snprintf(speed, sizeof(speed), "%.2fit/s", rate);
	weft_format_duration(elapsed, el, sizeof(el));
	weft_format_duration(eta, rem, sizeof(rem));

	add(p, &pos, "Epoch %lld: ", (long long)p->epoch);
	if (p->o.tty) {
		if (p->total > 0) {
			add(p, &pos, "%3d%%|", (int)floor(frac * 100));
			add_bar(p, &pos, frac);
			add(p, &pos, "| %lld/%lld [%s<%s, %s", (long long)p->step,
			    (long long)p->total, el, rem, speed);
		} else {
			add(p, &pos, "%lld [%s, %s", (long long)p->step, el, speed);
		}
		for (size_t i = 0; i < n; i++) {
			add(p, &pos, ", %s=", m[i].name);
			add_value(p, &pos, m[i].value);
		}
		add(p, &pos, "]");
	} else {
		if (p->total > 0)
			add(p, &pos, "%lld/%lld (%d%%) [%s<%s, %s]", (long long)p->step,
			    (long long)p->total, (int)floor(frac * 100), el, rem, speed);
		else
			add(p, &pos, "%lld [%s, %s]", (long long)p->step, el, speed);
		for (size_t i = 0; i < n; i++) {
			add(p, &pos, " %s=", m[i].name);
			add_value(p, &pos, m[i].value);
		}
	}
	return p->line;
}

static void draw(weft_progress *p, const weft_metric *m, size_t n, double t)
{
	weft_progress_format(p, m, n, t);
	if (p->o.tty) {
		/* Return to column 0, draw, clear what an older, longer line left. */
		fprintf(p->o.out, "\r%s\033[K", p->line);
		p->drawn = 1;
	} else {
		fprintf(p->o.out, "%s\n", p->line);
		p->last_logged = p->step;
	}
	fflush(p->o.out);
	p->t_last_draw = t;
}

void weft_progress_update(weft_progress *p, int64_t step, const weft_metric *m, size_t n)
{
	double t;

	p->step = step;
	if (!p->o.enabled)
		return;
	t = now(p);
	if (p->o.tty) {
		if (t - p->t_last_draw >= p->o.refresh_s)
			draw(p, m, n, t);
	} else if (step - p->last_logged >= p->o.log_every) {
		draw(p, m, n, t);
	}
}

void weft_progress_end_epoch(weft_progress *p, const weft_metric *m, size_t n)
{
	if (!p->o.enabled)
		return;
	draw(p, m, n, now(p));
	if (p->o.tty) {
		fputc('\n', p->o.out);
		fflush(p->o.out);
		p->drawn = 0;
	}
}
