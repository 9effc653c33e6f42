/* weft/pp_schedule.h - pipeline-parallel schedules as pure functions.
 *
 * A pipeline of p ranks runs S = p * v stages (v "virtual" stages, or
 * model chunks, per rank): chunk c of rank r is stage s = c * p + r
 * (Megatron-LM's interleaved layout; v = 1 gives the plain layout, rank r
 * = stage r). One optimizer step streams m micro-batches through it.
 *
 * weft_pp_schedule turns (kind, rank, p, m, v) into the ordered list of
 * what that rank does in one step: forward and backward of (micro, chunk)
 * and the point-to-point messages around them:
 *     RECV_ACT   before a forward whose stage is not the first
 *     SEND_ACT   after a forward whose stage is not the last
 *     RECV_GRAD  before a backward whose stage is not the last
 *     SEND_GRAD  after a backward whose stage is not the first
 * Sends go to rank (r + 1) mod p (activations) and (r - 1) mod p
 * (gradients). The runtime treats sends as non-blocking and receives as
 * blocking; the simulator (sim.h) checks that every schedule completes
 * under that rule and measures its bubble.
 *
 * Schedules:
 *   gpipe            all m forwards, then all m backwards (GPipe)
 *   1f1b             p - r - 1 warm-up forwards, then one forward / one
 *                    backward alternately, then the remaining backwards
 *                    (PipeDream-Flush); at most p micro-batches in flight
 *   interleaved_1f1b 1f1b over the m * v (micro, chunk) pairs in
 *                    Megatron's order: forwards walk chunks 0..v-1 in
 *                    groups of p micro-batches, backwards chunks v-1..0;
 *                    needs m a multiple of p and p >= 2
 *
 * Header-only and self-contained (no allocation, no last-error, nothing of
 * libweft): the pp strategy plugin runs these schedules, and the core's
 * simulator (core/pipeline/sim.h) and the tests check the very same code;
 * a third-party pipeline strategy may use it as well.
 * Every function is `static inline`, so a plugin links nothing for it.
 * Errors are returned as a nonzero code with a message written into the
 * caller's buffer, naming the numbers and what to change.
 */
#ifndef WEFT_PP_SCHEDULE_H
#define WEFT_PP_SCHEDULE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Schedule kinds. Values are part of the SDK: only ever appended. */
typedef enum weft_pp_kind {
	WEFT_PP_GPIPE = 0,
	WEFT_PP_1F1B = 1,
	WEFT_PP_INTERLEAVED = 2,
	WEFT_PP_KIND_COUNT = 3
} weft_pp_kind;

/* What one action does. Values are part of the SDK. */
typedef enum weft_pp_op {
	WEFT_PP_FORWARD = 0,
	WEFT_PP_BACKWARD = 1,
	WEFT_PP_SEND_ACT = 2,
	WEFT_PP_RECV_ACT = 3,
	WEFT_PP_SEND_GRAD = 4,
	WEFT_PP_RECV_GRAD = 5
} weft_pp_op;

/* One action of a rank's step. */
typedef struct weft_pp_action {
	int32_t op;     /* weft_pp_op */
	int32_t micro;  /* micro-batch 0 .. m-1 */
	int32_t chunk;  /* model chunk on this rank 0 .. v-1 */
	int32_t stage;  /* global stage chunk * p + rank */
	int32_t peer;   /* send/recv: the other rank; else -1 */
} weft_pp_action;

/* Writes the message into err[0..len) (when err is not NULL) and returns
 * -1. Internal to this header. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static inline int weft_pp_fail_(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* "gpipe", "1f1b", "interleaved_1f1b"; "?" otherwise. Static storage. */
static inline const char *weft_pp_kind_name(weft_pp_kind kind)
{
	switch (kind) {
	case WEFT_PP_GPIPE: return "gpipe";
	case WEFT_PP_1F1B: return "1f1b";
	case WEFT_PP_INTERLEAVED: return "interleaved_1f1b";
	case WEFT_PP_KIND_COUNT: break;
	}
	return "?";
}

/* "F", "B", "send_act", "recv_act", "send_grad", "recv_grad"; "?"
 * otherwise. Static storage. */
static inline const char *weft_pp_op_name(weft_pp_op op)
{
	switch (op) {
	case WEFT_PP_FORWARD: return "F";
	case WEFT_PP_BACKWARD: return "B";
	case WEFT_PP_SEND_ACT: return "send_act";
	case WEFT_PP_RECV_ACT: return "recv_act";
	case WEFT_PP_SEND_GRAD: return "send_grad";
	case WEFT_PP_RECV_GRAD: return "recv_grad";
	}
	return "?";
}

/* Checks that (kind, p, m, v) is a schedule that exists: p, m, v >= 1;
 * v == 1 for gpipe and 1f1b; for interleaved_1f1b p >= 2 and m a multiple
 * of p. Returns 0, or -1 with an explanation (naming the numbers and what
 * to change) in err[0..len). */
static inline int weft_pp_check(weft_pp_kind kind, int p, int m, int v, char *err, size_t len)
{
	if ((unsigned)kind >= (unsigned)WEFT_PP_KIND_COUNT)
		return weft_pp_fail_(err, len, "unknown pipeline schedule %d (gpipe, 1f1b, "
				     "interleaved_1f1b)", (int)kind);
	if (p < 1 || m < 1 || v < 1)
		return weft_pp_fail_(err, len, "pipeline of %d ranks, %d micro-batches and %d "
				     "virtual stages per rank: each must be at least 1", p, m, v);
	if (kind != WEFT_PP_INTERLEAVED && v != 1)
		return weft_pp_fail_(err, len, "schedule %s runs one stage per rank, but "
				     "virtual_stages is %d; use schedule: interleaved_1f1b for "
				     "several, or virtual_stages: 1", weft_pp_kind_name(kind), v);
	if (kind == WEFT_PP_INTERLEAVED && p < 2)
		return weft_pp_fail_(err, len, "schedule interleaved_1f1b needs at least 2 pipeline "
				     "ranks, got pp = %d; use 1f1b", p);
	if (kind == WEFT_PP_INTERLEAVED && m % p != 0)
		return weft_pp_fail_(err, len, "schedule interleaved_1f1b needs the micro-batches "
				     "per step (%d, trainer.accumulate_grad_batches) to be a "
				     "multiple of the pipeline ranks (%d); use %d or %d "
				     "micro-batches, or schedule: 1f1b",
				     m, p, m / p * p > 0 ? m / p * p : p, (m / p + 1) * p);
	return 0;
}

/* The most actions one rank's step can have: 6 * m * v (0 when m or v is
 * not positive). */
static inline size_t weft_pp_max_actions(int m, int v)
{
	return m > 0 && v > 0 ? (size_t)6 * (size_t)m * (size_t)v : 0;
}

/* The list being written by weft_pp_schedule. Internal to this header. */
typedef struct weft_pp_builder_ {
	weft_pp_action *out;
	size_t cap, n;
	int rank, p, v, S;
} weft_pp_builder_;

/* Appends one action; -1 when the list is full. Internal. */
static inline int weft_pp_push_(weft_pp_builder_ *b, weft_pp_op op, int micro, int chunk,
				int peer)
{
	weft_pp_action *a;

	if (b->n == b->cap)
		return -1;
	a = &b->out[b->n++];
	a->op = (int32_t)op;
	a->micro = micro;
	a->chunk = chunk;
	a->stage = chunk * b->p + b->rank;
	a->peer = peer;
	return 0;
}

/* A forward or backward of (micro, chunk) with its messages. Internal. */
static inline int weft_pp_compute_(weft_pp_builder_ *b, int backward, int micro, int chunk)
{
	int s = chunk * b->p + b->rank;
	int next = (b->rank + 1) % b->p, prev = (b->rank + b->p - 1) % b->p;

	if (!backward)
		return (s > 0 && weft_pp_push_(b, WEFT_PP_RECV_ACT, micro, chunk, prev)) ||
		       weft_pp_push_(b, WEFT_PP_FORWARD, micro, chunk, -1) ||
		       (s < b->S - 1 && weft_pp_push_(b, WEFT_PP_SEND_ACT, micro, chunk, next))
		       ? -1 : 0;
	return (s < b->S - 1 && weft_pp_push_(b, WEFT_PP_RECV_GRAD, micro, chunk, next)) ||
	       weft_pp_push_(b, WEFT_PP_BACKWARD, micro, chunk, -1) ||
	       (s > 0 && weft_pp_push_(b, WEFT_PP_SEND_GRAD, micro, chunk, prev)) ? -1 : 0;
}

/* Megatron's mapping of the k-th forward (or backward) of a rank onto
 * (micro, chunk): groups of p micro-batches walk the chunks in turn.
 * Internal. */
static inline void weft_pp_virtual_of_(int k, int p, int v, int backward, int *micro,
				       int *chunk)
{
	int c = (k % (p * v)) / p;

	*chunk = backward ? v - 1 - c : c;
	*micro = (k / (p * v)) * p + k % p;
}

/* warm forwards, then forward(warm + i) / backward(i) pairs, then the
 * backwards still owed, over `total` (micro, chunk) pairs in Megatron's
 * order (with v == 1 the k-th is micro-batch k). Internal. */
static inline int weft_pp_one_f_one_b_(weft_pp_builder_ *b, int total, int warm)
{
	int micro, chunk, rc = 0;

	for (int k = 0; k < warm && !rc; k++) {
		weft_pp_virtual_of_(k, b->p, b->v, 0, &micro, &chunk);
		rc = weft_pp_compute_(b, 0, micro, chunk);
	}
	for (int i = 0; i < total - warm && !rc; i++) {
		weft_pp_virtual_of_(warm + i, b->p, b->v, 0, &micro, &chunk);
		rc = weft_pp_compute_(b, 0, micro, chunk);
		weft_pp_virtual_of_(i, b->p, b->v, 1, &micro, &chunk);
		rc = rc || weft_pp_compute_(b, 1, micro, chunk);
	}
	for (int i = total - warm; i < total && !rc; i++) {
		weft_pp_virtual_of_(i, b->p, b->v, 1, &micro, &chunk);
		rc = weft_pp_compute_(b, 1, micro, chunk);
	}
	return rc;
}

/* Writes rank `rank`'s actions for one step into out[0..cap) and their
 * number into *n. Pure: same arguments, same list; never allocates, never
 * blocks. Returns 0, or -1 with err filled (and *n = 0) for arguments
 * weft_pp_check refuses, a rank outside [0, p), or cap too small
 * (cap >= weft_pp_max_actions(m, v) is always enough). */
static inline int weft_pp_schedule(weft_pp_kind kind, int rank, int p, int m, int v,
				   weft_pp_action *out, size_t cap, size_t *n, char *err,
				   size_t len)
{
	weft_pp_builder_ b;
	int total, warm, rc = 0;

	b.out = out;
	b.cap = cap;
	b.n = 0;
	b.rank = rank;
	b.p = p;
	b.v = v;
	b.S = p * v;
	*n = 0;
	if (weft_pp_check(kind, p, m, v, err, len))
		return -1;
	if (rank < 0 || rank >= p)
		return weft_pp_fail_(err, len, "pipeline rank %d is outside [0, %d)", rank, p);
	switch (kind) {
	case WEFT_PP_GPIPE:
		for (int i = 0; i < m && !rc; i++)
			rc = weft_pp_compute_(&b, 0, i, 0);
		for (int i = 0; i < m && !rc; i++)
			rc = weft_pp_compute_(&b, 1, i, 0);
		break;
	case WEFT_PP_1F1B:
		warm = p - rank - 1 < m ? p - rank - 1 : m;
		rc = weft_pp_one_f_one_b_(&b, m, warm);
		break;
	case WEFT_PP_INTERLEAVED:
		total = m * v;
		warm = m == p ? total : (p - rank - 1) * 2 + (v - 1) * p;
		rc = weft_pp_one_f_one_b_(&b, total, warm < total ? warm : total);
		break;
	default:
		return weft_pp_fail_(err, len, "unknown pipeline schedule %d", (int)kind);
	}
	if (rc)
		return weft_pp_fail_(err, len, "schedule %s for rank %d of %d (%d micro-batches, "
				     "%d virtual stages) needs more than %zu actions",
				     weft_pp_kind_name(kind), rank, p, m, v, cap);
	*n = b.n;
	return 0;
}

/* The most (micro, chunk) pairs whose forward ran and backward did not,
 * at any point of the action list: the activations a rank holds at once. */
static inline int weft_pp_max_in_flight(const weft_pp_action *a, size_t n)
{
	int cur = 0, peak = 0;

	for (size_t i = 0; i < n; i++) {
		if (a[i].op == WEFT_PP_FORWARD && ++cur > peak)
			peak = cur;
		else if (a[i].op == WEFT_PP_BACKWARD)
			cur--;
	}
	return peak;
}

/* The send of rank `peer`'s actions a[0..n) that a receive x of rank r
 * matches: its index, or -1. Internal to this header. */
static inline int64_t weft_pp_find_send_(const weft_pp_action *a, size_t n, int r,
					 const weft_pp_action *x)
{
	int op = x->op == WEFT_PP_RECV_ACT ? WEFT_PP_SEND_ACT : WEFT_PP_SEND_GRAD;
	int stage = x->op == WEFT_PP_RECV_ACT ? x->stage - 1 : x->stage + 1;

	for (size_t i = 0; i < n; i++)
		if (a[i].op == op && a[i].micro == x->micro && a[i].stage == stage &&
		    a[i].peer == r)
			return (int64_t)i;
	return -1;
}

/* One global order of a step's messages, for backends whose sends wait for
 * the receive (NCCL: a rendezvous, a rank's sends and receives queued on
 * one stream in issue order). acts holds all p ranks' schedules of one
 * step (rank q's n[q] actions from weft_pp_schedule at acts + q * cap).
 * Simulates them (sends non-blocking, receives blocking, the ranks
 * advanced in turn, each as far as its receives allow) and numbers each
 * send when it happens: idx[q * cap + i] for a send, -1 for any other
 * action; a receive's number is its send's. match (p * cap) and pos (p)
 * are the caller's scratch; nothing is allocated.
 *
 * A runtime that issues each rank's sends and receives in this order
 * (before a send numbered k, post every receive numbered below k; before
 * waiting for a receive, post those numbered below it) cannot deadlock on
 * such a backend: each stream holds increasing numbers, and the lowest
 * message not yet done is at the head of both its ranks' streams once
 * both issued it, which both do, since all a rank waits for before
 * issuing it is numbered lower (a receive that comes first in the rank's
 * schedule was sent before the rank got past it).
 * Returns 0, or -1 with a message: a receive that no rank sends, or
 * schedules that cannot finish. */
static inline int weft_pp_message_order(int p, const weft_pp_action *acts, const size_t *n,
					size_t cap, int64_t *idx, int64_t *match, size_t *pos,
					char *err, size_t len)
{
	int64_t next = 0;

	for (size_t i = 0; i < (size_t)p * cap; i++)
		idx[i] = match[i] = -1;
	for (int r = 0; r < p; r++)
		pos[r] = 0;
	for (;;) {
		int moved = 0, left = 0;

		for (int r = 0; r < p; r++) {
			for (; pos[r] < n[r]; pos[r]++) {
				size_t at = (size_t)r * cap + pos[r];
				const weft_pp_action *x = &acts[at];

				if (x->op == WEFT_PP_SEND_ACT || x->op == WEFT_PP_SEND_GRAD) {
					idx[at] = next++;
				} else if (x->op == WEFT_PP_RECV_ACT || x->op == WEFT_PP_RECV_GRAD) {
					if (x->peer < 0 || x->peer >= p)
						return weft_pp_fail_(err, len, "rank %d receives from rank "
								     "%d of %d", r, x->peer, p);
					if (match[at] < 0)
						match[at] = weft_pp_find_send_(acts + (size_t)x->peer * cap,
									       n[x->peer], r, x);
					if (match[at] < 0)
						return weft_pp_fail_(err, len, "rank %d never sends "
								     "micro-batch %d to stage %d",
								     x->peer, x->micro, x->stage);
					if (idx[(size_t)x->peer * cap + (size_t)match[at]] < 0)
						break;
				}
				moved = 1;
			}
			left |= pos[r] < n[r];
		}
		if (!left)
			return 0;
		if (!moved)
			return weft_pp_fail_(err, len, "the schedules cannot finish: every rank "
					     "left waits for a message");
	}
}

#ifdef __cplusplus
}
#endif
#endif /* WEFT_PP_SCHEDULE_H */
