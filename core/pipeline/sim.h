/* core/pipeline: a simulator of pipeline schedules (weft/pp_schedule.h).
 *
 * Each rank runs its action list in order on its own clock: a forward or
 * backward of one chunk takes cost->forward / v or cost->backward / v (the
 * costs are those of a micro-batch through one rank's whole share of the
 * model, so interleaving does not change the work), a send never blocks
 * and its message arrives cost->latency later, a receive waits until its
 * message arrived. Messages are matched by what they carry (activation or
 * gradient, micro-batch, stage), which is how the pp strategy receives
 * them (it posts a peer's messages in that peer's send order).
 *
 * While running it checks what makes a schedule correct: every (micro,
 * stage) has one forward and one backward, the forward first; every
 * message is sent once, by the rank that holds the neighbouring stage, and
 * received once; and every rank finishes (no deadlock).
 */
#ifndef WEFT_PIPELINE_SIM_H
#define WEFT_PIPELINE_SIM_H

#include "weft/pp_schedule.h"
#include "weft/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_PP_SIM_MAX_RANKS 64

typedef struct weft_pp_sim_cost {
	double forward;   /* one micro-batch through one rank's share, > 0 */
	double backward;  /* > 0 */
	double latency;   /* of one message, >= 0 */
	/* Optional measured costs: action[k][i] >= 0 is what action i of rank
	 * k's list (weft_pp_schedule's order) took; forward and backward are
	 * then ignored, a send takes its cost before the message leaves and a
	 * receive its cost after the message arrived. Borrowed. NULL: the
	 * uniform costs above. */
	const double *const *action;
} weft_pp_sim_cost;

typedef struct weft_pp_sim_result {
	double makespan;                          /* the step's length */
	double busy[WEFT_PP_SIM_MAX_RANKS];       /* compute time per rank */
	double idle[WEFT_PP_SIM_MAX_RANKS];       /* makespan - busy */
	double bubble;                            /* mean idle / makespan */
	int max_in_flight[WEFT_PP_SIM_MAX_RANKS]; /* weft_pp_max_in_flight per rank */
	size_t messages;                          /* sent (= received) in the step */
} weft_pp_sim_result;

/* Simulates one step of schedule (kind, p, m, v) under `cost`.
 * Errors: WEFT_ERR_INVALID_ARG for a schedule weft_pp_check refuses, p
 * above WEFT_PP_SIM_MAX_RANKS or a bad cost; WEFT_ERR_INTERNAL naming the
 * rank and action when the schedule breaks a rule above (a deadlock
 * names every waiting rank and the message it waits for);
 * WEFT_ERR_NOMEM. */
weft_status weft_pp_simulate(weft_pp_kind kind, int p, int m, int v, const weft_pp_sim_cost *cost,
			     weft_pp_sim_result *out);

/* The bubble fraction the textbook gives for balanced stages and free
 * messages: (p - 1) / (m + p - 1) for gpipe and 1f1b, and
 * ((p - 1) / v) / (m + (p - 1) / v) for interleaved_1f1b (Megatron-LM,
 * Narayanan et al. 2021, section 2.2). */
double weft_pp_bubble_formula(weft_pp_kind kind, int p, int m, int v);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_PIPELINE_SIM_H */
