/* The step's global message order (weft_pp_message_order in
 * weft/pp_schedule.h, what the pp plugin issues its sends and receives
 * by) never deadlocks on a backend whose sends wait for their receive.
 *
 * The model is NCCL's: each rank has one stream on which its sends and
 * receives run in issue order; the k-th send from A to B pairs with the
 * k-th receive B posted from A, and the two complete together once both
 * are at the head of their streams (a rendezvous). A rank's host runs its
 * schedule: compute never waits, a send is issued and not waited for, a
 * receive is waited for before the next action, and the step ends once
 * every send completed. Issued by the order (the plugin's rule: before a
 * send numbered k, post every receive numbered below k; a receive posts
 * those numbered below it first), every schedule of a grid of (kind, p,
 * m, v) completes, each message landing in the receive meant for it.
 * Issued in schedule order (every operation at its action, as pp did
 * before), 1f1b on 2 ranks deadlocks: the model would have caught it. */
#include <stdlib.h>

#include "weft/pp_schedule.h"
#include "weft_test.h"

#define MAXP 8
#define MAXA 1024

typedef struct rv_op {
	int send;     /* 1: send, 0: receive */
	int peer;
	int seq;      /* its place among this rank's operations with peer, per direction */
	size_t act;   /* the action it belongs to */
} rv_op;

typedef struct rv_rank {
	weft_pp_action a[MAXA];
	size_t n, pos;             /* actions, the host's place */
	rv_op ops[MAXA];           /* the stream, in issue order */
	size_t n_ops, head;
	int op_of[MAXA];           /* the stream operation of action i, or -1 */
	size_t order[MAXA];        /* receive actions by their number */
	size_t n_recv, next_recv;  /* ... and how many of them are posted */
	int sent_to[MAXP], recvd_from[MAXP];
} rv_rank;

static rv_rank ranks[MAXP];
static weft_pp_action acts[MAXP * MAXA];
static int64_t idx[MAXP * MAXA], match_[MAXP * MAXA];

static void issue(rv_rank *r, size_t act, int send)
{
	rv_op *o = &r->ops[r->n_ops];

	o->send = send;
	o->peer = r->a[act].peer;
	o->seq = send ? r->sent_to[o->peer]++ : r->recvd_from[o->peer]++;
	o->act = act;
	r->op_of[act] = (int)r->n_ops++;
}

static int is_send(int op)
{
	return op == WEFT_PP_SEND_ACT || op == WEFT_PP_SEND_GRAD;
}

/* Runs one step of p ranks; returns 1 when every rank finished, 0 on a
 * deadlock. *wrong counts messages that landed in another receive. */
static int run(int p, int ordered, int *wrong)
{
	*wrong = 0;
	for (;;) {
		int moved = 0;

		/* the hosts, each as far as its receives allow */
		for (int q = 0; q < p; q++) {
			rv_rank *r = &ranks[q];

			for (; r->pos < r->n; r->pos++) {
				size_t i = r->pos;
				int op = r->a[i].op;

				if (is_send(op)) {
					int64_t k = idx[(size_t)q * MAXA + i];

					while (ordered && r->next_recv < r->n_recv &&
					       match_[(size_t)q * MAXA + r->order[r->next_recv]] < k)
						issue(r, r->order[r->next_recv++], 0);
					issue(r, i, 1);
				} else if (op == WEFT_PP_RECV_ACT || op == WEFT_PP_RECV_GRAD) {
					if (ordered)
						while (r->op_of[i] < 0)
							issue(r, r->order[r->next_recv++], 0);
					else if (r->op_of[i] < 0)
						issue(r, i, 0);
					if (r->head <= (size_t)r->op_of[i])
						break;  /* waits for the receive */
				}
				moved = 1;
			}
		}
		/* the streams: a send and its receive at both heads complete */
		for (int q = 0; q < p; q++) {
			rv_rank *r = &ranks[q], *b;
			rv_op *s, *x;

			if (r->head == r->n_ops || !r->ops[r->head].send)
				continue;
			s = &r->ops[r->head];
			b = &ranks[s->peer];
			if (b->head == b->n_ops)
				continue;
			x = &b->ops[b->head];
			if (x->send || x->peer != q || x->seq != s->seq)
				continue;
			/* the message meant for that receive? */
			{
				const weft_pp_action *sa = &r->a[s->act], *ra = &b->a[x->act];
				int want = ra->op == WEFT_PP_RECV_ACT ? WEFT_PP_SEND_ACT : WEFT_PP_SEND_GRAD;
				int from = ra->op == WEFT_PP_RECV_ACT ? ra->stage - 1 : ra->stage + 1;

				*wrong += sa->op != want || sa->micro != ra->micro || sa->stage != from;
			}
			r->head++;
			b->head++;
			moved = 1;
		}
		if (!moved)
			break;
	}
	for (int q = 0; q < p; q++)
		if (ranks[q].pos < ranks[q].n || ranks[q].head < ranks[q].n_ops)
			return 0;
	return 1;
}

/* Builds the p schedules and the order; 0 when (kind, p, m, v) is no
 * valid schedule. */
static int setup(weft_pp_kind kind, int p, int m, int v)
{
	size_t n[MAXP], pos[MAXP];
	char err[256];

	if (weft_pp_check(kind, p, m, v, err, sizeof(err)))
		return 0;
	for (int q = 0; q < p; q++) {
		rv_rank *r = &ranks[q];

		r->pos = r->n_ops = r->head = r->n_recv = r->next_recv = 0;
		for (int j = 0; j < MAXP; j++)
			r->sent_to[j] = r->recvd_from[j] = 0;
		WT_REQUIRE(!weft_pp_schedule(kind, q, p, m, v, acts + (size_t)q * MAXA, MAXA, &n[q],
					     err, sizeof(err)));
	}
	WT_REQUIRE(!weft_pp_message_order(p, acts, n, MAXA, idx, match_, pos, err, sizeof(err)));
	for (int q = 0; q < p; q++) {
		rv_rank *r = &ranks[q];

		r->n = n[q];
		for (size_t i = 0; i < n[q]; i++) {
			const weft_pp_action *x = &acts[(size_t)q * MAXA + i];

			r->a[i] = *x;
			r->op_of[i] = -1;
			/* a receive's number is its send's: kept in match_ */
			if (x->op == WEFT_PP_RECV_ACT || x->op == WEFT_PP_RECV_GRAD)
				match_[(size_t)q * MAXA + i] =
					idx[(size_t)x->peer * MAXA + (size_t)match_[(size_t)q * MAXA + i]];
		}
		/* receives by number (insertion sort: a few hundred) */
		for (size_t i = 0; i < n[q]; i++) {
			size_t k;

			if (r->a[i].op != WEFT_PP_RECV_ACT && r->a[i].op != WEFT_PP_RECV_GRAD)
				continue;
			for (k = r->n_recv; k > 0 && match_[(size_t)q * MAXA + r->order[k - 1]] >
						 match_[(size_t)q * MAXA + i]; k--)
				r->order[k] = r->order[k - 1];
			r->order[k] = i;
			r->n_recv++;
		}
	}
	return 1;
}

/* Every schedule of the grid completes in the order, each message in its
 * receive. */
static void test_ordered_never_deadlocks(void)
{
	const int ps[] = { 2, 3, 4, 8 }, ms[] = { 1, 2, 3, 4, 5, 8, 12, 16 };
	int cases = 0;

	for (int kind = 0; kind < WEFT_PP_KIND_COUNT; kind++)
		for (size_t ip = 0; ip < sizeof(ps) / sizeof(ps[0]); ip++)
			for (size_t im = 0; im < sizeof(ms) / sizeof(ms[0]); im++)
				for (int v = 1; v <= (kind == WEFT_PP_INTERLEAVED ? 4 : 1); v++) {
					int wrong, done;

					if (!setup((weft_pp_kind)kind, ps[ip], ms[im], v))
						continue;
					done = run(ps[ip], 1, &wrong);
					if (!done || wrong)
						fprintf(stderr, "%s p=%d m=%d v=%d: %s, %d message(s) "
							"in the wrong receive\n",
							weft_pp_kind_name((weft_pp_kind)kind), ps[ip],
							ms[im], v, done ? "finished" : "deadlocked", wrong);
					WT_CHECK(done && wrong == 0);
					cases++;
				}
	/* 4 p x 8 m for gpipe and 1f1b, and the interleaved ones that are valid */
	WT_CHECK(cases > 64);
}

/* Issued at their actions, 1f1b's stages each queue a send ahead of the
 * receive the other waits for: the model deadlocks, as NCCL did. */
static void test_schedule_order_deadlocks(void)
{
	int wrong;

	WT_REQUIRE(setup(WEFT_PP_1F1B, 2, 4, 1));
	WT_CHECK(run(2, 0, &wrong) == 0);
	/* gpipe's messages all flow one way at a time: fine either way */
	WT_REQUIRE(setup(WEFT_PP_GPIPE, 2, 4, 1));
	WT_CHECK(run(2, 0, &wrong) == 1 && wrong == 0);
}

int main(void)
{
	test_ordered_never_deadlocks();
	test_schedule_order_deadlocks();
	return wt_done("test_pipeline_rendezvous");
}
