/* train/throughput.h - tokens (or samples) per second and model FLOPs
 * utilization, as Lightning's ThroughputMonitor reports them: in the
 * progress bar always, in metrics.csv and TensorBoard with
 * trainer.callbacks.throughput_monitor (opt-in, as Lightning's callback;
 * the other columns of a run stay comparable byte for byte across runs).
 *
 * A step's time runs from fetching its first micro-batch to the end of its
 * optimizer update (validation, checkpoints and logging are not counted).
 * Items are the tokens (GPT: rows x sequence length) or samples (MLP) the
 * step trained on across the data-parallel ranks. MFU is the model's FLOPs
 * per second over the peak of all the job's devices:
 *   mfu = flops_per_item x items / seconds / (peak_flops x world)
 * with flops_per_item from weft_model_flops_per_token (6 N + 12 L C T for a
 * GPT, nanoGPT's and llm.c's count) and peak_flops per device:
 * trainer.peak_flops, or on the CPU the derived peak of
 * weft_cpu_peak_flops, or unknown (no MFU column) on a GPU without
 * trainer.peak_flops. docs/config.md ("peak_flops") says the same for users.
 */
#ifndef WEFT_TRAIN_THROUGHPUT_H
#define WEFT_TRAIN_THROUGHPUT_H

#include <stddef.h>
#include <stdint.h>

#include "runlog/metric.h"
#include "weft/module.h"

typedef struct weft_throughput {
	int per_token;          /* 1: tokens (GPT), 0: samples */
	double flops_per_item;  /* training FLOPs per token or sample; 0: unknown */
	double peak_total;      /* peak FLOP/s of all the job's devices; 0: unknown */
	double items, seconds;  /* since the fit began */
	double step_rate;       /* the newest step's items per second */
} weft_throughput;

/* Training FLOPs (forward and backward) per token of `m` at sequence
 * length T (per sample for an MLP): weft_model_flops_per_token, plus, when
 * m holds tensor-parallel shards of a larger whole (whole_numel above its
 * own parameter count), 6 per token for each element of the other shards,
 * which the other ranks of its group apply to the same tokens. */
double weft_throughput_flops_per_token(const weft_model *m, int64_t T, int64_t whole_numel);

/* The peak float32 FLOP/s of `threads` cores of this CPU, derived from a
 * /proc/cpuinfo text: threads x the clock ("cpu MHz" of the first
 * processor) x FLOPs per cycle per core from its vector flags: 64 with
 * avx512f (two 16-wide FMA pipes), 32 with avx2 and fma (two 8-wide FMA
 * pipes), 16 with avx, 8 otherwise. An upper bound for what the cores can
 * do at that clock; trainer.peak_flops replaces it with a measured figure.
 * Writes into how (len bytes) the derivation in words. Returns 0 when the
 * text gives no clock (then how says why). */
double weft_cpu_peak_flops(const char *cpuinfo, int64_t threads, char *how, size_t len);

/* Starts counting: per_token as above, flops_per_item (0: unknown) and the
 * peak FLOP/s of all the devices (0: unknown, then no MFU). */
void weft_throughput_init(weft_throughput *tp, int per_token, double flops_per_item,
			  double peak_total);

/* Adds a step of `items` tokens or samples that took `seconds`. */
void weft_throughput_add(weft_throughput *tp, double items, double seconds);

/* The metrics of the newest step and the fit's average into m (room for
 * 4): tokens_per_sec, tokens_per_sec_avg (samples_per_sec... for an MLP),
 * then mfu, mfu_avg when the peak and the FLOPs are known. Names are
 * static. Returns how many it wrote (0 before the first step). */
size_t weft_throughput_metrics(const weft_throughput *tp, weft_metric *m);

/* The fit's averages only, for the progress bar ("tokens/s" or
 * "samples/s", then "mfu" when known) into m (room for 2). */
size_t weft_throughput_progress(const weft_throughput *tp, weft_metric *m);

#endif /* WEFT_TRAIN_THROUGHPUT_H */
