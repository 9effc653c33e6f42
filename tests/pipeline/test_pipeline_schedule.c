/* Pipeline schedules (weft/pp_schedule.h) and the simulator
 * (sim.h): structural properties of every schedule over a grid of
 * (p, m, v), the in-flight bounds that set activation memory, the
 * bubble against the textbook formulas, and the configuration errors. */
#include <stdlib.h>

#include "weft/pp_schedule.h"
#include "pipeline/sim.h"
#include "weft/status.h"
#include "weft_test.h"

#define MAXA 4096

/* Every (micro, chunk) of the rank appears once as F and once as B, the F
 * first; messages sit right around their compute and name the right
 * peers; forwards of one micro-batch walk the chunks upwards. */
static void check_structure(weft_pp_kind kind, int rank, int p, int m, int v,
			    const weft_pp_action *a, size_t n)
{
	static int fpos[64][8], bpos[64][8];
	int S = p * v, ok = 1;

	for (int i = 0; i < m; i++)
		for (int c = 0; c < v; c++)
			fpos[i][c] = bpos[i][c] = -1;
	for (size_t k = 0; k < n; k++) {
		const weft_pp_action *x = &a[k];
		int s = x->chunk * p + rank;

		ok &= x->stage == s && x->micro >= 0 && x->micro < m && x->chunk >= 0 &&
		      x->chunk < v;
		if (x->op == WEFT_PP_FORWARD) {
			ok &= fpos[x->micro][x->chunk] < 0;
			fpos[x->micro][x->chunk] = (int)k;
			/* receive right before, send right after */
			ok &= s == 0 || (k > 0 && a[k - 1].op == WEFT_PP_RECV_ACT &&
					 a[k - 1].micro == x->micro && a[k - 1].peer == (rank + p - 1) % p);
			ok &= s == S - 1 || (k + 1 < n && a[k + 1].op == WEFT_PP_SEND_ACT &&
					     a[k + 1].micro == x->micro && a[k + 1].peer == (rank + 1) % p);
		} else if (x->op == WEFT_PP_BACKWARD) {
			ok &= bpos[x->micro][x->chunk] < 0 && fpos[x->micro][x->chunk] >= 0;
			bpos[x->micro][x->chunk] = (int)k;
			ok &= s == S - 1 || (k > 0 && a[k - 1].op == WEFT_PP_RECV_GRAD &&
					     a[k - 1].peer == (rank + 1) % p);
			ok &= s == 0 || (k + 1 < n && a[k + 1].op == WEFT_PP_SEND_GRAD &&
					 a[k + 1].peer == (rank + p - 1) % p);
		} else {
			ok &= x->peer >= 0 && x->peer < p;
		}
	}
	for (int i = 0; i < m; i++)
		for (int c = 0; c < v; c++) {
			ok &= fpos[i][c] >= 0 && bpos[i][c] > fpos[i][c];
			if (c > 0)
				ok &= fpos[i][c] > fpos[i][c - 1] && bpos[i][c] < bpos[i][c - 1];
		}
	if (!ok)
		fprintf(stderr, "structure broken: %s rank %d p %d m %d v %d\n",
			weft_pp_kind_name(kind), rank, p, m, v);
	WT_CHECK(ok);
}

/* Over all ranks: every send has exactly one receive with the same
 * content on the peer, and the other way round. */
static void check_messages(weft_pp_kind kind, int p, int m, int v)
{
	static weft_pp_action a[16][MAXA];
	size_t n[16];
	char err[256];
	int ok = 1;

	for (int r = 0; r < p; r++)
		WT_REQUIRE(!weft_pp_schedule(kind, r, p, m, v, a[r], MAXA, &n[r], err, sizeof(err)));
	for (int r = 0; r < p; r++)
		for (size_t k = 0; k < n[r]; k++) {
			const weft_pp_action *x = &a[r][k];
			int want, hits = 0;

			if (x->op == WEFT_PP_SEND_ACT)
				want = WEFT_PP_RECV_ACT;
			else if (x->op == WEFT_PP_SEND_GRAD)
				want = WEFT_PP_RECV_GRAD;
			else
				continue;
			for (size_t j = 0; j < n[x->peer]; j++) {
				const weft_pp_action *y = &a[x->peer][j];
				int peer_stage = x->op == WEFT_PP_SEND_ACT ? x->stage + 1 : x->stage - 1;

				hits += y->op == want && y->micro == x->micro && y->peer == r &&
					y->stage == peer_stage;
			}
			ok &= hits == 1;
		}
	/* as many receives as sends */
	{
		size_t sends = 0, recvs = 0;

		for (int r = 0; r < p; r++)
			for (size_t k = 0; k < n[r]; k++) {
				sends += a[r][k].op == WEFT_PP_SEND_ACT || a[r][k].op == WEFT_PP_SEND_GRAD;
				recvs += a[r][k].op == WEFT_PP_RECV_ACT || a[r][k].op == WEFT_PP_RECV_GRAD;
			}
		/* 2 messages per micro-batch per stage boundary */
		ok &= sends == recvs && sends == (size_t)2 * (size_t)m * (size_t)(p * v - 1);
	}
	if (!ok)
		fprintf(stderr, "messages broken: %s p %d m %d v %d\n", weft_pp_kind_name(kind), p, m, v);
	WT_CHECK(ok);
}

static void test_grid(void)
{
	static weft_pp_action a[MAXA];
	const int ps[] = { 1, 2, 3, 4, 8 }, ms[] = { 1, 2, 3, 4, 5, 8, 12, 16 };
	char err[256];

	for (int kind = 0; kind < WEFT_PP_KIND_COUNT; kind++)
		for (size_t ip = 0; ip < sizeof(ps) / sizeof(ps[0]); ip++)
			for (size_t im = 0; im < sizeof(ms) / sizeof(ms[0]); im++)
				for (int v = 1; v <= (kind == WEFT_PP_INTERLEAVED ? 4 : 1); v++) {
					int p = ps[ip], m = ms[im];
					weft_pp_sim_cost cost = { .forward = 1, .backward = 2 };
					weft_pp_sim_result res;

					if (weft_pp_check(kind, p, m, v, err, sizeof(err)))
						continue;
					for (int r = 0; r < p; r++) {
						size_t n;

						WT_REQUIRE(!weft_pp_schedule(kind, r, p, m, v, a, MAXA, &n,
									     err, sizeof(err)));
						WT_CHECK(n <= weft_pp_max_actions(m, v));
						check_structure(kind, r, p, m, v, a, n);
					}
					check_messages(kind, p, m, v);
					/* runs to the end without deadlock under blocking receives */
					WT_OK(weft_pp_simulate(kind, p, m, v, &cost, &res));
					WT_CHECK(res.messages == (size_t)2 * m * (p * v - 1));
					for (int r = 0; r < p; r++) {
						/* GPipe holds all m; 1F1B at most p (p - r on rank r) */
						if (kind == WEFT_PP_GPIPE)
							WT_CHECK(res.max_in_flight[r] == m);
						if (kind == WEFT_PP_1F1B)
							WT_CHECK(res.max_in_flight[r] ==
								 (p - r < m ? p - r : m));
						WT_CHECK(res.max_in_flight[r] <= m * v);
					}
				}
}

/* Schedules are pure: the same arguments give the same list. */
static void test_pure(void)
{
	static weft_pp_action a[MAXA], b[MAXA];
	size_t na, nb;
	char err[256];

	WT_REQUIRE(!weft_pp_schedule(WEFT_PP_INTERLEAVED, 1, 4, 8, 2, a, MAXA, &na, err, sizeof(err)));
	WT_REQUIRE(!weft_pp_schedule(WEFT_PP_INTERLEAVED, 1, 4, 8, 2, b, MAXA, &nb, err, sizeof(err)));
	WT_CHECK(na == nb && !memcmp(a, b, na * sizeof(a[0])));
}

/* A hand-checked schedule: 1F1B, p = 2, m = 3, rank 0 warms up with one
 * forward, then alternates. */
static void test_1f1b_literal(void)
{
	static weft_pp_action a[MAXA];
	size_t n;
	char err[256];
	const int want[][2] = {
		{ WEFT_PP_FORWARD, 0 }, { WEFT_PP_SEND_ACT, 0 },
		{ WEFT_PP_FORWARD, 1 }, { WEFT_PP_SEND_ACT, 1 },
		{ WEFT_PP_RECV_GRAD, 0 }, { WEFT_PP_BACKWARD, 0 },
		{ WEFT_PP_FORWARD, 2 }, { WEFT_PP_SEND_ACT, 2 },
		{ WEFT_PP_RECV_GRAD, 1 }, { WEFT_PP_BACKWARD, 1 },
		{ WEFT_PP_RECV_GRAD, 2 }, { WEFT_PP_BACKWARD, 2 },
	};

	WT_REQUIRE(!weft_pp_schedule(WEFT_PP_1F1B, 0, 2, 3, 1, a, MAXA, &n, err, sizeof(err)));
	WT_REQUIRE(n == sizeof(want) / sizeof(want[0]));
	for (size_t k = 0; k < n; k++)
		WT_CHECK(a[k].op == want[k][0] && a[k].micro == want[k][1]);
	WT_CHECK(weft_pp_max_in_flight(a, n) == 2);
}

/* Balanced stages and free messages: the simulated bubble is the
 * formula's, exactly (the schedule is a closed-form pipeline, so only
 * floating-point rounding separates them: 1e-12). Interleaving with v = 2
 * halves the idle time of p = 4. */
static void test_bubble(void)
{
	weft_pp_sim_cost cost = { .forward = 1.0, .backward = 2.0, .latency = 0.0 };
	weft_pp_sim_result r1, ri, rg;
	const int ps[] = { 2, 4, 8 }, ms[] = { 4, 8, 16 };

	for (size_t i = 0; i < 3; i++)
		for (size_t j = 0; j < 3; j++) {
			int p = ps[i], m = ms[j];

			WT_OK(weft_pp_simulate(WEFT_PP_GPIPE, p, m, 1, &cost, &rg));
			WT_OK(weft_pp_simulate(WEFT_PP_1F1B, p, m, 1, &cost, &r1));
			WT_CLOSE(rg.bubble, weft_pp_bubble_formula(WEFT_PP_GPIPE, p, m, 1), 1e-12, 1e-12);
			WT_CLOSE(r1.bubble, weft_pp_bubble_formula(WEFT_PP_1F1B, p, m, 1), 1e-12, 1e-12);
			WT_CLOSE(r1.makespan, (m + p - 1) * 3.0, 1e-12, 0);
		}
	WT_OK(weft_pp_simulate(WEFT_PP_1F1B, 4, 8, 1, &cost, &r1));
	WT_OK(weft_pp_simulate(WEFT_PP_INTERLEAVED, 4, 8, 2, &cost, &ri));
	fprintf(stderr, "p=4 m=8: 1f1b bubble %.4f (idle %.3f), interleaved v=2 bubble %.4f "
		"(idle %.3f)\n", r1.bubble, r1.idle[0], ri.bubble, ri.idle[0]);
	for (int r = 0; r < 4; r++)
		WT_CLOSE(ri.idle[r], r1.idle[r] / 2.0, 1e-12, 1e-12);
	WT_CLOSE(ri.bubble, weft_pp_bubble_formula(WEFT_PP_INTERLEAVED, 4, 8, 2), 1e-12, 1e-12);
	/* interleaving holds more micro-batch chunks in flight than 1F1B */
	WT_CHECK(ri.max_in_flight[0] > r1.max_in_flight[0]);
	/* latency stretches the step but never deadlocks */
	cost.latency = 0.25;
	WT_OK(weft_pp_simulate(WEFT_PP_INTERLEAVED, 4, 8, 2, &cost, &ri));
	WT_CHECK(ri.makespan > 0);
}

static void test_errors(void)
{
	char buf[256], *err = buf;
	weft_pp_action a[8];
	size_t n;
	weft_pp_sim_cost cost = { .forward = 1, .backward = 1 };
	weft_pp_sim_result r;

	WT_CHECK(weft_pp_check(WEFT_PP_INTERLEAVED, 4, 6, 2, err, sizeof(buf)) == -1);
	WT_STR_CONTAINS(err, "(6, trainer.accumulate_grad_batches)");
	WT_STR_CONTAINS(err, "multiple of the pipeline ranks (4)");
	WT_STR_CONTAINS(err, "use 4 or 8 micro-batches");
	WT_CHECK(weft_pp_check(WEFT_PP_1F1B, 4, 8, 2, err, sizeof(buf)) == -1);
	WT_STR_CONTAINS(err, "virtual_stages is 2");
	WT_CHECK(weft_pp_check(WEFT_PP_INTERLEAVED, 1, 4, 2, err, sizeof(buf)) == -1);
	WT_STR_CONTAINS(err, "at least 2 pipeline ranks, got pp = 1");
	WT_CHECK(weft_pp_check(WEFT_PP_GPIPE, 2, 0, 1, err, sizeof(buf)) == -1);
	WT_STR_CONTAINS(err, "0 micro-batches");
	WT_CHECK(weft_pp_schedule(WEFT_PP_GPIPE, 2, 2, 4, 1, a, 8, &n, err, sizeof(buf)) == -1);
	WT_STR_CONTAINS(err, "rank 2 is outside [0, 2)");
	WT_CHECK(weft_pp_schedule(WEFT_PP_GPIPE, 0, 2, 4, 1, a, 8, &n, err, sizeof(buf)) == -1);
	WT_STR_CONTAINS(err, "needs more than 8 actions");
	WT_FAILS(weft_pp_simulate(WEFT_PP_INTERLEAVED, 4, 6, 2, &cost, &r), WEFT_ERR_INVALID_ARG,
		 "multiple of the pipeline ranks (4)");
	cost.forward = 0;
	WT_FAILS(weft_pp_simulate(WEFT_PP_GPIPE, 2, 2, 1, &cost, &r), WEFT_ERR_INVALID_ARG,
		 "must be > 0");
}

/* Measured per-action costs (weft_pp_sim_cost.action): the uniform
 * costs written out per action give the same step; a slower last stage
 * (its forwards and backwards 1.5 times as long) lengthens it to what the
 * slow stage bounds; a negative cost is refused. */
static void test_action_costs(void)
{
	enum { P = 2, M = 4 };
	weft_pp_action a[P][6 * M];
	double cost[P][6 * M];
	const double *rows[P] = { cost[0], cost[1] };
	weft_pp_sim_cost uni = { .forward = 1.0, .backward = 2.0 }, per = { .action = rows };
	weft_pp_sim_result r1, r2;
	size_t n[P];
	char err[128];

	for (int k = 0; k < P; k++) {
		WT_REQUIRE(weft_pp_schedule(WEFT_PP_1F1B, k, P, M, 1, a[k], 6 * M, &n[k], err,
					    sizeof(err)) == 0);
		for (size_t i = 0; i < n[k]; i++)
			cost[k][i] = a[k][i].op == WEFT_PP_FORWARD ? 1.0 :
				     a[k][i].op == WEFT_PP_BACKWARD ? 2.0 : 0.0;
	}
	WT_OK(weft_pp_simulate(WEFT_PP_1F1B, P, M, 1, &uni, &r1));
	WT_OK(weft_pp_simulate(WEFT_PP_1F1B, P, M, 1, &per, &r2));
	WT_CLOSE(r2.makespan, r1.makespan, 1e-12, 0);
	WT_CLOSE(r2.bubble, weft_pp_bubble_formula(WEFT_PP_1F1B, P, M, 1), 1e-12, 0);
	for (size_t i = 0; i < n[1]; i++)
		cost[1][i] *= 1.5;
	WT_OK(weft_pp_simulate(WEFT_PP_1F1B, P, M, 1, &per, &r2));
	/* rank 1 waits for the first activation (1), is busy 4 * 4.5 = 18,
	 * and rank 0's last backward (2) follows its last gradient */
	WT_CLOSE(r2.makespan, 19.0 + 2.0, 1e-12, 0);
	WT_CLOSE(r2.busy[1], 18.0, 1e-12, 0);
	cost[0][0] = -1.0;
	WT_FAILS(weft_pp_simulate(WEFT_PP_1F1B, P, M, 1, &per, &r2), WEFT_ERR_INVALID_ARG,
		 "rank 0's action 0 costs -1");
}

int main(void)
{
	test_action_costs();
	test_pure();
	test_1f1b_literal();
	test_grid();
	test_bubble();
	test_errors();
	return wt_done("test_pipeline_schedule");
}
