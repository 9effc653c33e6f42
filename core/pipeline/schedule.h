/* core/pipeline: pipeline-parallel schedules as pure functions.
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
 * This file has no dependency on the rest of weft (no allocation, no
 * last-error): the pp strategy plugin compiles it in as it is. Errors are
 * returned as a nonzero code with a message written into the caller's
 * buffer, naming the numbers.
 */
#ifndef WEFT_PIPELINE_SCHEDULE_H
#define WEFT_PIPELINE_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum weft_pp_kind {
	WEFT_PP_GPIPE = 0,
	WEFT_PP_1F1B = 1,
	WEFT_PP_INTERLEAVED = 2,
	WEFT_PP_KIND_COUNT = 3
} weft_pp_kind;

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

/* "gpipe", "1f1b", "interleaved_1f1b"; "?" otherwise. */
const char *weft_pp_kind_name(weft_pp_kind kind);

/* "F", "B", "send_act", "recv_act", "send_grad", "recv_grad". */
const char *weft_pp_op_name(weft_pp_op op);

/* Checks that (kind, p, m, v) is a schedule that exists: p, m, v >= 1;
 * v == 1 for gpipe and 1f1b; for interleaved_1f1b p >= 2 and m a multiple
 * of p. Returns 0, or -1 with an explanation (naming the numbers and what
 * to change) in err[0..len). */
int weft_pp_check(weft_pp_kind kind, int p, int m, int v, char *err, size_t len);

/* The most actions one rank's step can have: 6 * m * v. */
size_t weft_pp_max_actions(int m, int v);

/* Writes rank `rank`'s actions for one step into out[0..cap) and their
 * number into *n. Pure: same arguments, same list. Returns 0, or -1 with
 * err filled for arguments weft_pp_check refuses, a rank outside
 * [0, p), or cap too small (cap >= weft_pp_max_actions is always enough). */
int weft_pp_schedule(weft_pp_kind kind, int rank, int p, int m, int v, weft_pp_action *out,
		     size_t cap, size_t *n, char *err, size_t len);

/* The most (micro, chunk) pairs whose forward ran and backward did not,
 * at any point of the action list: the activations a rank holds at once. */
int weft_pp_max_in_flight(const weft_pp_action *a, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_PIPELINE_SCHEDULE_H */
