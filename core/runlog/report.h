/* runlog/report.h - what `weft fit` prints at the start and writes at the end.
 *
 * The start banner (accelerator, devices, strategy, comm, world size) and
 * the model summary table follow PyTorch Lightning's layout so its users
 * read them at a glance; summary.json is the machine-readable end of a run.
 */
#ifndef WEFT_RUNLOG_REPORT_H
#define WEFT_RUNLOG_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runlog/metric.h"
#include "weft/memory.h"
#include "weft/status.h"

typedef struct weft_run_banner {
	const char *accelerator;   /* "cpu" or "cuda" */
	int gpu_available;         /* a CUDA device was found */
	int64_t devices;           /* processes per node */
	int64_t num_nodes;
	int64_t world_size;
	int64_t global_rank;
	const char *strategy;      /* "ddp", "zero_2", ... */
	const char *comm;          /* "gloo", "nccl", ... */
	const char *precision;     /* "32-true", ... (NULL: not shown) */
	int64_t cpu_threads;       /* CPU kernel threads per device (0: not shown) */
} weft_run_banner;

/* Prints the start lines, as Lightning does:
 *   GPU available: False, used: False
 *   Accelerator: cpu, devices: 2, nodes: 1, precision: 32-true, threads per device: 1
 *   Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2
 *   ------...
 *   strategy=ddp, distributed_backend=gloo
 *   All distributed processes registered. Starting with 2 processes
 *   ------...
 * Fields left NULL print as "?". */
void weft_print_banner(FILE *out, const weft_run_banner *b);

/* One row of the model summary: a top-level module. Strings borrowed. */
typedef struct weft_summary_row {
	const char *name;
	const char *type;
	int64_t params;
} weft_summary_row;

/* Prints Lightning's model summary:
 *     | Name        | Type      | Params
 *   ----------------------------------------
 *   0 | transformer | GPT       | 124 M
 *   ----------------------------------------
 *   124 M     Trainable params
 *   0         Non-trainable params
 *   124 M     Total params
 *   497.759   Total estimated model params size (MB)
 * Totals are passed (rows may not cover every parameter); `param_bytes` is
 * the bytes all parameters take (4 per fp32 parameter); MB is 1e6 bytes. */
void weft_print_model_summary(FILE *out, const weft_summary_row *rows, size_t n,
			      int64_t trainable, int64_t non_trainable, int64_t param_bytes);

/* Lightning's short parameter count: 123 -> "123", 1234 -> "1.2 K",
 * 101000 -> "101 K", 124439808 -> "124 M", into buf (returned). */
const char *weft_human_count(int64_t n, char *buf, size_t len);

/* The end-of-run record, summary.json. Pointers are borrowed. */
typedef struct weft_run_summary {
	const char *strategy;
	const char *comm;
	int64_t world_size;
	int64_t steps;
	int64_t epochs;
	double wall_seconds;
	const weft_metric *final_metrics;  /* e.g. train_loss, val_loss, val_acc */
	size_t n_final_metrics;
	double throughput;                 /* per second, over the whole run */
	const char *throughput_unit;       /* "tokens/s" or "samples/s" */
	const weft_metric *step_time;      /* mean seconds per step by phase */
	size_t n_step_time;
	const weft_mem_stats *memory;      /* peaks per category; NULL: omitted */
	const weft_metric *totals;         /* whole-run sums ("comm_bytes", ...); may be empty */
	size_t n_totals;
	const weft_metric *pipeline;       /* pipeline strategies: "bubble_fraction" (mean over
					    * ranks and steps), ...; empty: omitted */
	size_t n_pipeline;
	/* the rank that reached each peak of `memory` (its categories, then
	 * the total), when `memory` is the max over ranks; NULL: omitted */
	const int64_t *memory_rank;
	/* the steady peaks (from the end of the second step on, when the
	 * activation arenas have their steady size), max over ranks, and the
	 * rank of each; NULL: omitted (a run of two steps or fewer) */
	const weft_mem_stats *steady_memory;
	const int64_t *steady_memory_rank;
	/* `weft plan`'s bytes per category for the rank that holds the most,
	 * -1 where it plans none; NULL: omitted */
	const int64_t *plan_bytes;
	/* the host's and the device's own peaks (weft_mem_get_split_stats),
	 * max over ranks, and the rank of each, for the whole run and the
	 * steady steps as above; NULL: omitted */
	const weft_mem_stats *host_memory, *device_memory;
	const int64_t *host_memory_rank, *device_memory_rank;
	const weft_mem_stats *steady_host_memory, *steady_device_memory;
	const int64_t *steady_host_memory_rank, *steady_device_memory_rank;
} weft_run_summary;

/* Writes `path` (through path.tmp and a rename) as a JSON object:
 *   {"strategy", "comm", "world_size", "steps", "epochs", "wall_seconds",
 *    "final_metrics": {name: value}, "throughput": {"value", "unit"},
 *    "step_time_s": {phase: seconds}, "totals": {name: value} (when given),
 *    "pipeline": {name: value} (when given), "peak_bytes": {category: bytes,
 *    "total": bytes}, "peak_rank": {category: rank, "total": rank} (when
 *    memory_rank is given), "steady_peak_bytes" and "steady_peak_rank" (the
 *    same from the third step on, when steady_memory is given),
 *    "plan_bytes": {category: bytes} (the planned
 *    categories, when plan_bytes is given), "host_peak_bytes",
 *    "host_peak_rank", "device_peak_bytes", "device_peak_rank" and their
 *    "steady_" forms (the host's and the device's own peaks, each when
 *    given)}
 * Errors: WEFT_ERR_IO naming the path. */
weft_status weft_run_summary_write(const char *path, const weft_run_summary *s);

#endif /* WEFT_RUNLOG_REPORT_H */
