/* harness.h - drives a strategy plugin the way the trainer does, for
 * multi-rank equivalence tests (ddp, dp, zero ...).
 *
 * h_run builds a model from a seed, an optimizer through the plugin
 * registry (optim_builtin.so) and, when this process is a launched rank
 * (WEFT_RANK ... set by h_spawn or `weft launch`), the gloo communicator
 * through core/dist's store and process group; it fills a
 * weft_strategy_env whose callbacks run weft_model_loss (or the toy
 * model's ops), scale the loss and back-propagate it, and runs `steps`
 * optimizer steps of synthetic data.
 *
 * Data: micro-batch m of global step s is a pure function of
 * (seed, s, m, global row): every run, whatever its world size, sees the
 * same global batch, and rank r takes rows [r * B, (r + 1) * B) of each
 * global micro-batch (row_offset r * B). A one-process run with batch
 * B * N therefore computes the same global step as N ranks of batch B.
 *
 * h_spawn runs N copies of a program as the ranks of one job (store
 * served by the caller on a free port, WEFT_* variables, stderr to a
 * file, a deadline that kills a hung job): wt_spawn of tests/common.
 */
#ifndef WEFT_TEST_STRATEGY_HARNESS_H
#define WEFT_TEST_STRATEGY_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "common/spawn.h"
#include "weft/strategy.h"

#define H_MAX_STEPS 64
#define H_MAX_MICRO 16
#define H_MAX_RANKS 8

typedef enum h_model_kind {
	H_MODEL_TOY = 0, /* linear 16 -> 8, relu, linear 8 -> 4 from ops */
	H_MODEL_MLP = 1, /* weft_model_create_mlp: 784 -> 64 -> 10 */
	H_MODEL_GPT = 2  /* weft_model_create_gpt: 2 layers, n_embd 32, 2 heads, vocab 64, T 16 */
} h_model_kind;

typedef struct h_config {
	const char *strategy;      /* plugin name: "single", "ddp", "dp", ... */
	const char *strategy_yaml; /* its section as YAML ("{name: ddp, ...}"); NULL: none */
	h_model_kind model;
	int toy_unused;            /* TOY: add "unused.weight", never used in forward */
	int toy_unused_rank;       /* with toy_unused: only this rank skips it (-1: all) */
	int64_t batch;             /* rows per rank per micro-batch */
	int n_micro;               /* micro-batches per step (accumulate_grad_batches) */
	int steps;
	uint64_t seed;
	double lr;                 /* adamw's learning rate */
	double adam_eps;           /* adamw eps; 0: 1e-8 (PyTorch default) */
	int sgd;                   /* 1: SGD with momentum 0.9 instead of adamw */
	double clip;               /* gradient_clip_val; 0: off */
	int devices;               /* dp: replicas (env.n_devices) */
	int64_t gpt_n_layer, gpt_n_embd, gpt_n_head, gpt_block, gpt_vocab; /* 0: defaults above */
	int threads;               /* CPU threads per process; 0: 1 */
	const char *comm_options;  /* the gloo backend's options as YAML ("{shm: off}");
				    * NULL: none */
	/* for error tests: */
	int uneven_rank;           /* this rank gets one row more (0 = off for rank 0 too:
				    * only applies with several ranks and rank > 0) */
	int env_world_size;        /* nonzero: claim this world size, with no communicator */
	int env_no_replicas;       /* 1: the env offers no replica_create */
	int env_cuda;              /* 1: the env claims device cuda:0 (create-time checks) */
	/* ---- appended (zero) ---- */
	int first_step;            /* data and optimizer steps start at this 0-based step */
	const char *save_dir;      /* after the steps: model.safetensors + optimizer.bin
				    * (global flat coordinates) into this directory */
	const char *load_dir;      /* after setup: weights and optimizer state from here */
	/* ---- appended (pp) ---- Ranks that read distinct data (pipeline
	 * ranks share theirs): rank r reads the rows of data rank
	 * (r / data_stride) % data_ranks. 0: every rank reads its own. */
	int data_ranks, data_stride;
	/* ---- appended (ddp) ---- */
	double dropout;            /* GPT dropout; masks depend only on (seed, step, global row) */
	/* ---- appended (pp) ---- */
	int mem_peaks_after;       /* > 0: mem_peak covers only the steps after this many
				    * (pools and arenas have reached their steady size) */
	/* ---- appended (pp with tp) ---- */
	int gpt_tp;                /* > 1: rank r builds tp shard r % gpt_tp of the GPT
				    * (weft_model_options.tp_size), as a trainer does from
				    * strategy hybrid's plan */
	/* ---- appended (zero on devices) ---- */
	int lion;                  /* 1: lion instead of adamw (an optimizer with no
				    * device kernel) */
	/* ---- appended (zero memory) ---- */
	int mem_peak_with_save;    /* 1: mem_peak also covers the save into save_dir */
	int save_whole_too;        /* 1: the save also writes model.whole.safetensors from
				    * the whole parameters (gather_params), to compare */
	/* ---- appended (activation checkpointing) ---- */
	int act_ckpt;              /* GPT: a weft_act_ckpt (nn/act_ckpt.h); 0: none */
	/* ---- appended (llama) ---- */
	const char *gpt_preset;    /* GPT: built by weft_model_from_config from
				    * {preset: this, n_layer, n_head, n_embd, vocab_size,
				    * block_size, dropout of gpt_*} (e.g. "llama3-tiny":
				    * RMSNorm, RoPE, SwiGLU, GQA, untied); NULL: GPT-2 */
	/* ---- appended (llama under tp / pp) ---- */
	int64_t gpt_kv_head;       /* with gpt_preset: model.n_kv_head; 0: the preset's */
	int64_t gpt_inter;         /* with gpt_preset: model.intermediate_size; 0: the
				    * preset's */
	uint32_t gpt_tp_flags;     /* with gpt_tp: weft_model_options.tp_flags (sequence
				    * and vocabulary parallelism, tp/tp.h) */
} h_config;

typedef struct h_result {
	int rank, world;
	int steps;
	double loss[H_MAX_STEPS];
	weft_step_report rep[H_MAX_STEPS];
	int64_t numel;             /* F32 parameter elements */
	float *weights;            /* numel floats after the last step; free() */
	double seconds;            /* wall time of the steps (not setup) */
	double step_seconds[H_MAX_STEPS]; /* wall time of each train_step */
	double step_cpu_seconds[H_MAX_STEPS]; /* CPU time of this process (all threads) in it */
	int64_t tokens_per_step;   /* rows (x T for the GPT) of the global batch */
	/* ---- appended (zero) ---- */
	int64_t mem_peak[WEFT_MEM_NUM_CATEGORIES]; /* allocator peaks over the steps
						      * (peaks reset after setup) */
	int64_t setup_peak_total;  /* the allocator's peak total from the start of the
				    * process to the end of the strategy's setup
				    * (model built as the strategy's build plan says) */
	int64_t setup_current[WEFT_MEM_NUM_CATEGORIES]; /* held at the end of setup */
} h_result;

/* Runs a whole training in this process (as a rank when WEFT_RANK is set,
 * else alone). On failure the last error says what went wrong; *out is
 * filled with what finished. Frees everything it made. */
weft_status h_run(const h_config *c, h_result *out);

/* The GPT-class model c describes (its preset and shape), built with `mo`
 * (a tp shard, say) without running anything: what h_run trains. Free
 * with weft_model_free. */
weft_status h_model_create(const h_config *c, const weft_model_options *mo, weft_model **out);

/* Frees out->weights. */
void h_result_free(h_result *r);

/* Writes / reads a result to / from `path` (binary). */
int h_result_write(const h_result *r, const char *path);
int h_result_read(h_result *r, const char *path);

/* n, status[], seconds[], hung, err[] of each rank (common/spawn.h). */
typedef wt_spawn_result h_spawn_result;

/* Runs n copies of argv[0] (a path) with argv as arguments, rank r with
 * WEFT_RANK=r and the job's store; waits at most deadline_s (then kills
 * every rank and sets hung). Returns 0 when every rank was started. */
int h_spawn(int n, char *const argv[], double deadline_s, h_spawn_result *res);

/* Whether rank r exited with status 0; prints its stderr when not. */
int h_spawn_ok(const h_spawn_result *res, int r);

/* ---- a job of ranks against one process (the equivalence tests) ---- */

/* The rank side: runs h_run(c) as this rank and writes its result to
 * PREFIX-rankR.bin (R: its rank). Returns the rank's exit status: 0; 3
 * when the run failed (its error printed); 1 when the file cannot be
 * written. */
int h_rank_write(const h_config *c, const char *prefix);

/* The test side: runs n ranks of `self` as "self rank ARGS..." (args
 * NULL-terminated, at most 13, the last one PREFIX) within deadline_s and
 * reads rank r's result (h_rank_write) into got[r], removing the files.
 * Returns 1 when every rank started, none hung, each exited 0 and its
 * result was read (free each got[r] then); else 0 with nothing to free,
 * having printed why (a failed rank's stderr). */
int h_run_ranks(const char *self, int n, char *const args[], double deadline_s, h_result *got);

/* The deadline of a job of up to H_MAX_RANKS ranks training the harness's
 * small models for a few steps, even under ASan on two loaded cores. */
#define H_JOB_DEADLINE_S 90.0

/* A rank's n weights w against the reference's: with sgd the largest
 * |w - ref| / (|ref| + floor), else the relative L2 error (AdamW: its
 * first update, lr * sign(g), can flip an element whose gradient is zero
 * up to rounding). Prints `who`, the measure and the element when the
 * error exceeds tol. Returns the error; the test asserts it <= tol. */
double h_weight_error(const float *w, const float *ref, int64_t n, int sgd, double floor,
		      double tol, const char *who);

/* Largest |a - b| / (|b| + floor) over n elements, and its index. */
double h_max_rel(const float *a, const float *b, int64_t n, double floor, int64_t *where);

/* ||a - b||_2 / ||b||_2 over n elements. */
double h_rel_l2(const float *a, const float *b, int64_t n);

#endif
