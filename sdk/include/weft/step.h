/* weft/step.h - one training step, written once: the micro-batch
 * accumulation loop and the step clock, for strategy plugins
 * (weft/strategy.h gives the recipe they fit into).
 *
 * Header-only: every function here is static inline. Including it adds no
 * symbol to a plugin or to libweft and changes no ABI; the helpers call
 * only host services of ABI 1.0 (params_zero_grad, ctx_step_begin) and the
 * env's forward_backward, so a plugin that uses them still loads in any
 * weft it loaded in before. Event recording (weft_step_clock_note, and the
 * events part of weft_step_clock_finish) needs the ABI 1.1 headers, which
 * declare weft_step_event; built against the 1.0 headers the rest is there.
 *
 * The clock reads clock_gettime (POSIX). Under a strict -std=c11 define
 * _POSIX_C_SOURCE 200809L (or _GNU_SOURCE) before the first #include.
 */
#ifndef WEFT_STEP_H
#define WEFT_STEP_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "weft/strategy.h"

#if !defined(CLOCK_MONOTONIC) || !defined(CLOCK_THREAD_CPUTIME_ID)
#error "weft/step.h needs clock_gettime: define _POSIX_C_SOURCE 200809L (or _GNU_SOURCE) before the first #include of the file, or compile with -std=gnu11"
#endif

/* 1: the headers declare weft_step_event and weft_step_report.events
 * (ABI 1.1 on), so the clock can record a timeline. */
#if WEFT_ABI_MAJOR > 1 || (WEFT_ABI_MAJOR == 1 && WEFT_ABI_MINOR >= 1)
#define WEFT_STEP_HAS_EVENTS 1
#else
#define WEFT_STEP_HAS_EVENTS 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the accumulation loop ---------------------------------------------- */

/* Runs micro-batch b (index i in the step) forward and backward with the
 * contract of weft_strategy_env.forward_backward: the loss is multiplied
 * by loss_scale before backward, *loss receives the unscaled mean loss.
 * It does not step the context (weft_step_accumulate has done so). */
typedef weft_status (*weft_micro_fn)(void *user, size_t i, const weft_micro_batch *b,
				     double loss_scale, double *loss);

/* How weft_step_accumulate runs a step's micro-batches. Start from
 * weft_accumulate_env and change what differs. */
typedef struct weft_accumulate {
	const weft_host *host;          /* the table given to weft_plugin_entry */
	const weft_strategy_env *env;   /* forward_backward and trainer, when run is NULL */
	weft_ctx *ctx;                  /* stepped (host->ctx_step_begin) before each
					 * micro-batch; NULL: not stepped */
	weft_params *zero;              /* gradients zeroed (host->params_zero_grad)
					 * before the first; NULL: the strategy
					 * clears its own gradient buffers */
	weft_micro_fn run;              /* NULL: env->forward_backward on env's model */
	void *user;                     /* run's first argument */
} weft_accumulate;

/* The usual case: env's model, its context and its parameters, run by
 * env->forward_backward. */
static inline weft_accumulate weft_accumulate_env(const weft_host *host,
						  const weft_strategy_env *env)
{
	weft_accumulate a = { host, env, env->ctx, env->params, NULL, NULL };

	return a;
}

/* The rows of micro[0 .. n): this rank's rows in the step. */
static inline int64_t weft_step_rows(const weft_micro_batch *micro, size_t n)
{
	int64_t rows = 0;

	for (size_t i = 0; i < n; i++)
		rows += micro[i].rows;
	return rows;
}

/* The loop every data-parallel step starts with. Zeroes a->zero's
 * gradients, then for each micro-batch i in order: steps a->ctx, runs it
 * (a->run, or env->forward_backward) with loss_scale micro[i].rows / rows,
 * and adds loss * micro[i].rows to *loss_sum. With rows =
 * weft_step_rows(micro, n_micro) the gradients accumulate to those of the
 * row-weighted mean loss over the step, and *loss_sum / rows is that mean;
 * a strategy that runs slices of the micro-batches (dp's replicas) passes
 * the slices and the whole step's rows. A micro-batch of 0 rows still
 * counts (run decides what running it means). *loss_sum is set to 0
 * first and holds the sum so far after an error. Blocking, on the calling
 * thread. Errors: params_zero_grad's and run's, returned as they are (the
 * caller adds its context); the loop stops at the first. */
static inline weft_status weft_step_accumulate(const weft_accumulate *a,
					       const weft_micro_batch *micro, size_t n_micro,
					       int64_t rows, double *loss_sum)
{
	weft_status st;

	*loss_sum = 0.0;
	if (a->zero && (st = a->host->params_zero_grad(a->zero)) != WEFT_OK)
		return st;
	for (size_t i = 0; i < n_micro; i++) {
		const weft_micro_batch *b = &micro[i];
		double scale = (double)b->rows / (double)rows, loss = 0.0;

		if (a->ctx)
			a->host->ctx_step_begin(a->ctx);
		st = a->run ? a->run(a->user, i, b, scale, &loss) :
			      a->env->forward_backward(a->env->trainer, b, scale, &loss);
		if (st != WEFT_OK)
			return st;
		*loss_sum += loss * (double)b->rows;
	}
	return WEFT_OK;
}

/* ---- the step clock ------------------------------------------------------ */

/* Nanoseconds on this process's CLOCK_MONOTONIC: the clock of
 * weft_step_event's t0_ns and t1_ns, and of every duration in
 * weft_step_report. */
static inline int64_t weft_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CPU time of the calling thread, ns (the process's would count the comm
 * and kernel threads' spinning too): weft_step_event.cpu_ns. */
static inline int64_t weft_clock_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Where an interval began: weft_step_clock_mark's wall and CPU times. */
typedef struct weft_step_mark {
	int64_t t_ns, cpu_ns;
} weft_step_mark;

/* One step's clock: when it began and, when the strategy records a
 * timeline, its intervals. Plain data, no resources: one per strategy,
 * restarted by every train_step. */
typedef struct weft_step_clock {
	int64_t t0_ns;                  /* weft_step_clock_start's weft_clock_ns */
	struct weft_step_event *ev;     /* weft_step_clock_events' buffer, or NULL:
					 * no timeline */
	size_t n_ev, cap_ev;            /* intervals recorded / room in ev */
} weft_step_clock;

/* Starts the step: t0_ns is now, and no timeline. */
static inline void weft_step_clock_start(weft_step_clock *c)
{
	c->t0_ns = weft_clock_ns();
	c->ev = NULL;
	c->n_ev = 0;
	c->cap_ev = 0;
}

/* Gives the started clock a timeline: intervals go into ev[0 .. cap), from
 * the first. The strategy owns ev and keeps it until the next train_step
 * (weft_step_clock_finish lends it to the report). */
static inline void weft_step_clock_events(weft_step_clock *c, struct weft_step_event *ev,
					  size_t cap)
{
	c->ev = ev;
	c->n_ev = 0;
	c->cap_ev = ev ? cap : 0;
}

/* Nanoseconds since weft_step_clock_start. */
static inline int64_t weft_step_clock_elapsed(const weft_step_clock *c)
{
	return weft_clock_ns() - c->t0_ns;
}

/* Now, as the start of an interval for weft_step_clock_note. */
static inline weft_step_mark weft_step_clock_mark(void)
{
	weft_step_mark m = { weft_clock_ns(), weft_clock_cpu_ns() };

	return m;
}

#if WEFT_STEP_HAS_EVENTS
/* The track an event of `kind` (WEFT_EVENT_*) is drawn on: forward,
 * backward, the optimizer and a whole step compute; the rest communicate. */
static inline int32_t weft_step_event_track(int32_t kind)
{
	return kind == WEFT_EVENT_FORWARD || kind == WEFT_EVENT_BACKWARD ||
	       kind == WEFT_EVENT_OPTIMIZER || kind == WEFT_EVENT_STEP ?
	       WEFT_TRACK_COMPUTE : WEFT_TRACK_COMM;
}

/* Records the interval from `from` (weft_step_clock_mark) to now as an
 * event of `kind` (WEFT_EVENT_*) on its track, for micro-batch `micro` and
 * pipeline stage `stage` (-1: none). Does nothing without a timeline or
 * when ev is full (the timeline then ends early; size ev for the step).
 * Returns now (weft_clock_ns), which the caller may use as the next mark's
 * wall time. */
static inline int64_t weft_step_clock_note(weft_step_clock *c, weft_step_mark from, int32_t kind,
					   int32_t micro, int32_t stage)
{
	int64_t now = weft_clock_ns();
	weft_step_event *e;

	if (c->n_ev >= c->cap_ev)
		return now;
	e = &c->ev[c->n_ev++];
	e->track = weft_step_event_track(kind);
	e->kind = kind;
	e->micro = micro;
	e->stage = stage;
	e->t0_ns = from.t_ns;
	e->t1_ns = now;
	e->cpu_ns = weft_clock_cpu_ns() - from.cpu_ns;
	return now;
}
#endif

/* Ends the step's bookkeeping in *out, after the strategy has set
 * exposed_comm_ns (0 when nothing waited on collectives): compute_ns is
 * the time since weft_step_clock_start less exposed_comm_ns, and, with a
 * timeline and a report that has the members (struct_size), events and
 * n_events borrow the clock's buffer. Call it last: what runs after it is
 * not counted. */
static inline void weft_step_clock_finish(const weft_step_clock *c, weft_step_report *out)
{
#if WEFT_STEP_HAS_EVENTS
	if (c->ev && out->struct_size >= offsetof(weft_step_report, n_events) +
					 sizeof(out->n_events)) {
		out->events = c->ev;
		out->n_events = c->n_ev;
	}
#endif
	out->compute_ns = weft_step_clock_elapsed(c) - out->exposed_comm_ns;
}

#ifdef __cplusplus
}
#endif
#endif /* WEFT_STEP_H */
