/* The pipeline schedule simulator (sim.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/sim.h"

double weft_pp_bubble_formula(weft_pp_kind kind, int p, int m, int v)
{
	double pv = kind == WEFT_PP_INTERLEAVED ? (double)(p - 1) / (double)v : (double)(p - 1);

	return pv / ((double)m + pv);
}

typedef struct sim_rank {
	weft_pp_action *a;
	size_t n, next;
	double t;
	double busy;     /* forward and backward time */
} sim_rank;

typedef struct sim {
	int p, m, v, S;
	const weft_pp_sim_cost *cost;
	sim_rank r[WEFT_PP_SIM_MAX_RANKS];
	double *act, *grad;   /* [m * S] arrival time of the message for (micro, stage); < 0: none */
	uint8_t *act_got, *grad_got, *fwd, *bwd; /* [m * S] */
	size_t messages;
} sim;

static weft_status broken(const weft_pp_action *x, int rank, const char *why)
{
	return weft_error_set(WEFT_ERR_INTERNAL, "pipeline schedule: rank %d, %s of micro-batch %d "
			      "stage %d: %s", rank, weft_pp_op_name((weft_pp_op)x->op), x->micro,
			      x->stage, why);
}

/* Runs one action of rank `k`; *blocked = 1 when it waits for a message. */
static weft_status step_one(sim *s, int k, int *blocked)
{
	sim_rank *r = &s->r[k];
	const weft_pp_action *x = &r->a[r->next];
	size_t at = (size_t)x->micro * (size_t)s->S + (size_t)x->stage;
	int peer_stage;
	double *box, own;
	uint8_t *got;

	*blocked = 0;
	/* what this action takes on this rank */
	if (s->cost->action)
		own = s->cost->action[k][r->next];
	else if (x->op == WEFT_PP_FORWARD)
		own = s->cost->forward / s->v;
	else if (x->op == WEFT_PP_BACKWARD)
		own = s->cost->backward / s->v;
	else
		own = 0.0;
	switch (x->op) {
	case WEFT_PP_FORWARD:
		if (s->fwd[at]++)
			return broken(x, k, "a second forward");
		r->t += own;
		r->busy += own;
		break;
	case WEFT_PP_BACKWARD:
		if (!s->fwd[at])
			return broken(x, k, "backward before its forward");
		if (s->bwd[at]++)
			return broken(x, k, "a second backward");
		r->t += own;
		r->busy += own;
		break;
	case WEFT_PP_SEND_ACT:
	case WEFT_PP_SEND_GRAD:
		peer_stage = x->op == WEFT_PP_SEND_ACT ? x->stage + 1 : x->stage - 1;
		if (peer_stage < 0 || peer_stage >= s->S || peer_stage % s->p != x->peer)
			return broken(x, k, "sent to a rank that does not hold the next stage");
		box = x->op == WEFT_PP_SEND_ACT ? s->act : s->grad;
		at = (size_t)x->micro * (size_t)s->S + (size_t)peer_stage;
		if (box[at] >= 0)
			return broken(x, k, "sent twice");
		if (x->op == WEFT_PP_SEND_ACT ? !s->fwd[(size_t)x->micro * s->S + x->stage] :
						!s->bwd[(size_t)x->micro * s->S + x->stage])
			return broken(x, k, "sent before it was computed");
		r->t += own;
		box[at] = r->t + s->cost->latency;
		s->messages++;
		break;
	case WEFT_PP_RECV_ACT:
	case WEFT_PP_RECV_GRAD:
		peer_stage = x->op == WEFT_PP_RECV_ACT ? x->stage - 1 : x->stage + 1;
		if (peer_stage < 0 || peer_stage >= s->S || peer_stage % s->p != x->peer)
			return broken(x, k, "received from a rank that does not hold the "
				      "neighbouring stage");
		box = x->op == WEFT_PP_RECV_ACT ? s->act : s->grad;
		got = x->op == WEFT_PP_RECV_ACT ? s->act_got : s->grad_got;
		if (box[at] < 0) {
			*blocked = 1;
			return WEFT_OK;
		}
		if (got[at]++)
			return broken(x, k, "received twice");
		if (box[at] > r->t)
			r->t = box[at];
		r->t += own;
		break;
	default:
		return broken(x, k, "unknown action");
	}
	r->next++;
	return WEFT_OK;
}

static weft_status run(sim *s)
{
	int progress = 1, left = s->p;
	weft_status st;

	while (left && progress) {
		progress = 0;
		left = 0;
		for (int k = 0; k < s->p; k++) {
			sim_rank *r = &s->r[k];
			int blocked = 0;

			while (r->next < r->n && !blocked) {
				st = step_one(s, k, &blocked);
				if (st)
					return st;
				progress |= !blocked;
			}
			left += r->next < r->n;
		}
	}
	if (left) {
		char why[1024];
		size_t len = 0;

		why[0] = '\0';
		for (int k = 0; k < s->p && len < sizeof(why) - 1; k++) {
			const weft_pp_action *x;

			if (s->r[k].next >= s->r[k].n)
				continue;
			x = &s->r[k].a[s->r[k].next];
			len += (size_t)snprintf(why + len, sizeof(why) - len,
						"%srank %d waits in %s of micro-batch %d stage %d",
						len ? "; " : "", k, weft_pp_op_name((weft_pp_op)x->op),
						x->micro, x->stage);
		}
		return weft_error_set(WEFT_ERR_INTERNAL, "pipeline schedule deadlocks: %s", why);
	}
	for (size_t i = 0; i < (size_t)s->m * (size_t)s->S; i++)
		if (!s->fwd[i] || !s->bwd[i])
			return weft_error_set(WEFT_ERR_INTERNAL, "pipeline schedule: micro-batch %zu "
					      "stage %zu never ran its %s", i / (size_t)s->S,
					      i % (size_t)s->S, s->fwd[i] ? "backward" : "forward");
	for (size_t i = 0; i < (size_t)s->m * (size_t)s->S; i++)
		if ((s->act[i] >= 0) != !!s->act_got[i] || (s->grad[i] >= 0) != !!s->grad_got[i])
			return weft_error_set(WEFT_ERR_INTERNAL, "pipeline schedule: the %s for "
					      "micro-batch %zu stage %zu was sent but never received",
					      (s->act[i] >= 0) != !!s->act_got[i] ? "activation" :
					      "gradient", i / (size_t)s->S, i % (size_t)s->S);
	return WEFT_OK;
}

weft_status weft_pp_simulate(weft_pp_kind kind, int p, int m, int v, const weft_pp_sim_cost *cost,
			     weft_pp_sim_result *out)
{
	char err[256];
	sim s = { .p = p, .m = m, .v = v, .S = p * v, .cost = cost };
	size_t cells, cap = weft_pp_max_actions(m, v);
	weft_status st = WEFT_OK;

	memset(out, 0, sizeof(*out));
	if (weft_pp_check(kind, p, m, v, err, sizeof(err)))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s", err);
	if (p > WEFT_PP_SIM_MAX_RANKS)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "pipeline simulator: %d ranks; at most %d",
				      p, WEFT_PP_SIM_MAX_RANKS);
	if (!cost || (!cost->action && (!(cost->forward > 0) || !(cost->backward > 0))) ||
	    !(cost->latency >= 0))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "pipeline simulator: forward and backward "
				      "costs must be > 0 and latency >= 0");
	cells = (size_t)m * (size_t)s.S;
	s.act = malloc(cells * sizeof(double));
	s.grad = malloc(cells * sizeof(double));
	s.act_got = calloc(cells * 4, 1);
	if (!s.act || !s.grad || !s.act_got) {
		st = weft_error_set(WEFT_ERR_NOMEM, "pipeline simulator: %zu cells", cells);
		goto out_free;
	}
	s.grad_got = s.act_got + cells;
	s.fwd = s.grad_got + cells;
	s.bwd = s.fwd + cells;
	for (size_t i = 0; i < cells; i++)
		s.act[i] = s.grad[i] = -1.0;
	for (int k = 0; k < p; k++) {
		s.r[k].a = malloc(cap * sizeof(weft_pp_action));
		if (!s.r[k].a) {
			st = weft_error_set(WEFT_ERR_NOMEM, "pipeline simulator: actions");
			goto out_free;
		}
		if (weft_pp_schedule(kind, k, p, m, v, s.r[k].a, cap, &s.r[k].n, err, sizeof(err))) {
			st = weft_error_set(WEFT_ERR_INTERNAL, "%s", err);
			goto out_free;
		}
		out->max_in_flight[k] = weft_pp_max_in_flight(s.r[k].a, s.r[k].n);
		for (size_t i = 0; cost->action && i < s.r[k].n; i++)
			if (!(cost->action[k][i] >= 0)) {
				st = weft_error_set(WEFT_ERR_INVALID_ARG, "pipeline simulator: rank "
						    "%d's action %zu costs %g; costs must be >= 0",
						    k, i, cost->action[k][i]);
				goto out_free;
			}
	}
	st = run(&s);
	if (st)
		goto out_free;
	for (int k = 0; k < p; k++)
		if (s.r[k].t > out->makespan)
			out->makespan = s.r[k].t;
	for (int k = 0; k < p; k++) {
		out->busy[k] = s.r[k].busy;
		out->idle[k] = out->makespan - out->busy[k];
		out->bubble += out->idle[k] / out->makespan / p;
	}
	out->messages = s.messages;
out_free:
	for (int k = 0; k < p; k++)
		free(s.r[k].a);
	free(s.act);
	free(s.grad);
	free(s.act_got);
	return st;
}
