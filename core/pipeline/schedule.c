/* Pipeline schedules as pure functions (schedule.h). */
#include <stdarg.h>
#include <stdio.h>

#include "pipeline/schedule.h"

static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -1;
}

const char *weft_pp_kind_name(weft_pp_kind kind)
{
	switch (kind) {
	case WEFT_PP_GPIPE: return "gpipe";
	case WEFT_PP_1F1B: return "1f1b";
	case WEFT_PP_INTERLEAVED: return "interleaved_1f1b";
	case WEFT_PP_KIND_COUNT: break;
	}
	return "?";
}

const char *weft_pp_op_name(weft_pp_op op)
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

int weft_pp_check(weft_pp_kind kind, int p, int m, int v, char *err, size_t len)
{
	if ((unsigned)kind >= WEFT_PP_KIND_COUNT)
		return fail(err, len, "unknown pipeline schedule %d (gpipe, 1f1b, interleaved_1f1b)",
			    (int)kind);
	if (p < 1 || m < 1 || v < 1)
		return fail(err, len, "pipeline of %d ranks, %d micro-batches and %d virtual stages "
			    "per rank: each must be at least 1", p, m, v);
	if (kind != WEFT_PP_INTERLEAVED && v != 1)
		return fail(err, len, "schedule %s runs one stage per rank, but virtual_stages is %d; "
			    "use schedule: interleaved_1f1b for several, or virtual_stages: 1",
			    weft_pp_kind_name(kind), v);
	if (kind == WEFT_PP_INTERLEAVED && p < 2)
		return fail(err, len, "schedule interleaved_1f1b needs at least 2 pipeline ranks, "
			    "got pp = %d; use 1f1b", p);
	if (kind == WEFT_PP_INTERLEAVED && m % p != 0)
		return fail(err, len, "schedule interleaved_1f1b needs the micro-batches per step "
			    "(%d, trainer.accumulate_grad_batches) to be a multiple of the pipeline "
			    "ranks (%d); use %d or %d micro-batches, or schedule: 1f1b",
			    m, p, m / p * p > 0 ? m / p * p : p, (m / p + 1) * p);
	return 0;
}

size_t weft_pp_max_actions(int m, int v)
{
	return m > 0 && v > 0 ? (size_t)6 * (size_t)m * (size_t)v : 0;
}

typedef struct builder {
	weft_pp_action *out;
	size_t cap, n;
	int rank, p, v, S;
} builder;

static int push(builder *b, weft_pp_op op, int micro, int chunk, int peer)
{
	if (b->n == b->cap)
		return -1;
	b->out[b->n++] = (weft_pp_action){
		.op = op, .micro = micro, .chunk = chunk, .stage = chunk * b->p + b->rank,
		.peer = peer,
	};
	return 0;
}

/* A forward or backward of (micro, chunk) with its messages. */
static int compute(builder *b, int backward, int micro, int chunk)
{
	int s = chunk * b->p + b->rank;
	int next = (b->rank + 1) % b->p, prev = (b->rank + b->p - 1) % b->p;

	if (!backward)
		return (s > 0 && push(b, WEFT_PP_RECV_ACT, micro, chunk, prev)) ||
		       push(b, WEFT_PP_FORWARD, micro, chunk, -1) ||
		       (s < b->S - 1 && push(b, WEFT_PP_SEND_ACT, micro, chunk, next)) ? -1 : 0;
	return (s < b->S - 1 && push(b, WEFT_PP_RECV_GRAD, micro, chunk, next)) ||
	       push(b, WEFT_PP_BACKWARD, micro, chunk, -1) ||
	       (s > 0 && push(b, WEFT_PP_SEND_GRAD, micro, chunk, prev)) ? -1 : 0;
}

/* Megatron's mapping of the k-th forward (or backward) of a rank onto
 * (micro, chunk): groups of p micro-batches walk the chunks in turn. */
static void virtual_of(int k, int p, int v, int backward, int *micro, int *chunk)
{
	int c = (k % (p * v)) / p;

	*chunk = backward ? v - 1 - c : c;
	*micro = (k / (p * v)) * p + k % p;
}

/* warm forwards, then forward(warm + i) / backward(i) pairs, then the
 * backwards still owed, over `total` (micro, chunk) pairs in Megatron's
 * order (with v == 1 the k-th is micro-batch k). */
static int one_f_one_b(builder *b, int total, int warm)
{
	int micro, chunk, rc = 0;

	for (int k = 0; k < warm && !rc; k++) {
		virtual_of(k, b->p, b->v, 0, &micro, &chunk);
		rc = compute(b, 0, micro, chunk);
	}
	for (int i = 0; i < total - warm && !rc; i++) {
		virtual_of(warm + i, b->p, b->v, 0, &micro, &chunk);
		rc = compute(b, 0, micro, chunk);
		virtual_of(i, b->p, b->v, 1, &micro, &chunk);
		rc = rc || compute(b, 1, micro, chunk);
	}
	for (int i = total - warm; i < total && !rc; i++) {
		virtual_of(i, b->p, b->v, 1, &micro, &chunk);
		rc = compute(b, 1, micro, chunk);
	}
	return rc;
}

int weft_pp_schedule(weft_pp_kind kind, int rank, int p, int m, int v, weft_pp_action *out,
		     size_t cap, size_t *n, char *err, size_t len)
{
	builder b = { .out = out, .cap = cap, .rank = rank, .p = p, .v = v, .S = p * v };
	int total, warm, rc = 0;

	*n = 0;
	if (weft_pp_check(kind, p, m, v, err, len))
		return -1;
	if (rank < 0 || rank >= p)
		return fail(err, len, "pipeline rank %d is outside [0, %d)", rank, p);
	switch (kind) {
	case WEFT_PP_GPIPE:
		for (int i = 0; i < m && !rc; i++)
			rc = compute(&b, 0, i, 0);
		for (int i = 0; i < m && !rc; i++)
			rc = compute(&b, 1, i, 0);
		break;
	case WEFT_PP_1F1B:
		warm = p - rank - 1 < m ? p - rank - 1 : m;
		rc = one_f_one_b(&b, m, warm);
		break;
	case WEFT_PP_INTERLEAVED:
		total = m * v;
		warm = m == p ? total : (p - rank - 1) * 2 + (v - 1) * p;
		rc = one_f_one_b(&b, total, warm < total ? warm : total);
		break;
	default:
		return fail(err, len, "unknown pipeline schedule %d", (int)kind);
	}
	if (rc)
		return fail(err, len, "schedule %s for rank %d of %d (%d micro-batches, %d virtual "
			    "stages) needs more than %zu actions", weft_pp_kind_name(kind), rank, p,
			    m, v, cap);
	*n = b.n;
	return 0;
}

int weft_pp_max_in_flight(const weft_pp_action *a, size_t n)
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
