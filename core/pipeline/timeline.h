/* core/pipeline: the per-rank timeline of a run and its Chrome trace.
 *
 * Every rank records the busy intervals of each step on two tracks,
 * compute and communication (weft_step_event, weft/strategy.h): a pipeline
 * strategy gives its forwards, backwards, sends, receives and step-end
 * collectives; for any other strategy the trainer records the step as one
 * compute interval. What lies between intervals is idle time.
 *
 * weft_timeline_write_trace gathers every rank's intervals to rank 0 and
 * writes one Chrome-trace JSON file (the "Trace Event Format" Perfetto and
 * chrome://tracing open): a complete event ("ph": "X") per interval with
 * pid = rank, tid = track (0 compute, 1 comm), ts and dur in microseconds
 * on a common clock, and in args the step, micro-batch, stage and the
 * CPU time the interval took on its thread ("cpu_us", when measured).
 *
 * The common clock is rank 0's: at creation the ranks run 7 rounds of a
 * barrier, a clock reading and an all-gather of the readings; each rank's
 * offset to rank 0 is the median over rounds of the difference (a round
 * in which a rank was descheduled between barrier and reading does not
 * count), so clocks agree to within the barrier's exit skew (tens of
 * microseconds over gloo on one host) even across hosts whose monotonic
 * clocks do not.
 */
#ifndef WEFT_PIPELINE_TIMELINE_H
#define WEFT_PIPELINE_TIMELINE_H

#include "weft/comm.h"
#include "weft/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_timeline weft_timeline;

/* Starts a timeline on this rank. comm (of backend ops) is the job's world
 * communicator, or NULL in a one-process run; with one, every rank must
 * call this (it runs the clock alignment above). *out is
 * new; free with weft_timeline_free. Blocking. Errors: NOMEM; the
 * backend's, naming the barrier. */
weft_status weft_timeline_create(const weft_comm_ops *ops, weft_comm *comm, int32_t rank,
				 int32_t world, weft_timeline **out);

/* Adds the intervals of optimizer step `step` (1-based); copies them.
 * Not collective. Errors: NOMEM (the buffer grows by doubling). */
weft_status weft_timeline_add(weft_timeline *tl, int64_t step, const weft_step_event *ev,
			      size_t n);

/* Intervals recorded so far on this rank. */
size_t weft_timeline_count(const weft_timeline *tl);

/* The event kind's name in traces: "step", "forward", "backward",
 * "send_act", "recv_act", "send_grad", "recv_grad", "optimizer", "sync";
 * "?" for others. */
const char *weft_timeline_kind_name(int32_t kind);

/* Gathers every rank's intervals to rank 0, which writes the Chrome trace
 * to `path` (through path.tmp and a rename). Collective over the
 * communicator given at creation. Errors: the backend's; on rank 0
 * WEFT_ERR_IO naming the path, NOMEM. */
weft_status weft_timeline_write_trace(weft_timeline *tl, const char *path);

/* Frees a timeline. NULL is ignored. */
void weft_timeline_free(weft_timeline *tl);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_PIPELINE_TIMELINE_H */
