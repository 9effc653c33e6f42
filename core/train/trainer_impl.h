/* train/trainer_impl.h - the trainer's state, shared by its files: the
 * entry (trainer.c) over its setup (trainer_setup.c) and step environment
 * (trainer_env.c), the fit loop and validation (loop.c), checkpoints
 * (checkpoint.c), and the helpers below them all (trainer_common.h). */
#ifndef WEFT_TRAIN_TRAINER_IMPL_H
#define WEFT_TRAIN_TRAINER_IMPL_H

#include <limits.h>
#include <stdio.h>
#include <stdint.h>

#include "data/data_module.h"
#include "dist/dist.h"
#include "dist/pg.h"
#include "plugin/registry.h"
#include "runlog/metrics_csv.h"
#include "runlog/progress.h"
#include "train/throughput.h"
#include "runlog/tb_events.h"
#include "train/lr_schedule.h"
#include "train/optim_config.h"
#include "train/precision.h"
#include "train/trainer.h"
#include "train/trainer_common.h"
#include "train/trainer_config.h"
#include "weft/module.h"
#include "weft/strategy.h"
#include "weft/trainer.h"

/* A callback plugin in use. */
typedef struct weft_callback {
	const weft_callback_ops *ops;
	void *state;
	const char *name;
} weft_callback;

/* Why the fit loop ended (the last line of a run says it). */
typedef enum weft_stop_reason {
	WEFT_STOP_NONE = 0,
	WEFT_STOP_MAX_EPOCHS,
	WEFT_STOP_MAX_STEPS,
	WEFT_STOP_MAX_TIME,
	WEFT_STOP_EARLY,
	WEFT_STOP_CALLBACK,          /* a callback plugin set should_stop */
} weft_stop_reason;

/* A saved checkpoint and its monitored score (save_top_k). */
typedef struct weft_saved_ckpt {
	char path[WEFT_TRAINER_PATH];
	double score;
} weft_saved_ckpt;

struct weft_trainer {
	weft_config *cfg;
	const weft_cfg *root;
	weft_run_opts opts;
	weft_trainer_config tc;
	char config_dir[WEFT_TRAINER_PATH];
	/* the config file's stem: trainer.name when that is absent (tc.name
	 * then points here, so it lives as long as the trainer) */
	char default_name[256];

	/* the job */
	weft_dist_env denv;
	int rank, world;
	weft_store_server *store_srv;
	int relaunch;                   /* the config checked: re-run through the launcher */
	weft_store_client *store;
	weft_pg *pg;
	char pg_name[64];
	char comm_bind[64];               /* where the communicator listens ( default) */

	/* plugins */
	weft_registry *reg;
	const weft_comm_ops *comm_ops;
	const weft_optim_ops *optim_ops;
	const weft_strategy_ops *strat_ops;
	const char *strategy_file, *optim_file, *comm_file;

	/* model and training machinery */
	weft_model *model;
	struct weft_trainer_sampler *sampler; /* trainer.sample (sample.c); NULL: off */
	weft_ctx *ctx;
	weft_optim_config oc;
	void *optim;
	weft_optim_segment *segs;
	size_t nseg;
	weft_lr_schedule sched;
	weft_strategy_env env;
	void *strat;
	weft_data_module *data;
	weft_loader *train_loader;
	weft_loader *val_loader;
	int64_t batches_per_epoch;   /* micro-batches this rank trains per epoch */
	int64_t steps_per_epoch;     /* optimizer steps per epoch */
	int64_t val_batches;
	int64_t total_steps;         /* for the schedule; 0 when unbounded */

	/* output (rank 0) */
	char run_dir[WEFT_TRAINER_PATH];
	char ckpt_dir[WEFT_TRAINER_PATH];
	weft_csv_logger *csv;
	weft_tb_writer *tb;
	weft_progress progress;

	/* progress of the run; saved in checkpoints */
	int64_t global_step;
	int64_t epoch;
	int64_t next_batch;          /* micro-batch index in the epoch to read next */
	int64_t micro_in_step;       /* forward_backward calls so far in this step (dropout key) */
	double last_train_loss;
	double last_val_loss, last_val_acc;
	int have_val;
	double best_score;           /* early stopping */
	int64_t bad_checks;
	int stop;
	weft_stop_reason stop_reason;
	int64_t val_step;            /* the step of the newest validation; -1: none yet */
	int ckpt_unscored_warned;    /* the monitored metric was missing for a save (once) */
	weft_saved_ckpt topk[WEFT_TOPK_MAX];
	weft_callback callbacks[WEFT_MAX_CALLBACKS];
	size_t n_callbacks;
	double last_lr;
	int64_t n_topk;
	int64_t last_ckpt_step;      /* step of the newest save; -1: none */

	/* measurements */
	double t_start;
	double train_seconds;
	int64_t samples_seen, tokens_seen;
	int64_t compute_ns, comm_ns, exposed_ns, comm_bytes;
	double data_wait_s;
	weft_throughput tput;        /* tokens/s and MFU of this fit (metrics.csv, the bar) */

	/* fault injection for tests: WEFT_FAULT_KILL_AT_STEP=k makes this rank
	 * kill itself with SIGKILL after step k on the first attempt
	 * (WEFT_RESTART_COUNT 0), as a crashed node would. */
	int64_t fault_kill_step;

	/* summary.json's steady peaks: the first steps grow the activation
	 * arenas (up to twice their steady size) until the second step's end,
	 * where the peaks so far are kept in first_peaks and the allocator's
	 * are reset; from the third step on they are the steady ones, which
	 * the plan predicts (steady_steps counts those steps); the host's
	 * and the device's own peaks (weft_mem_get_split_stats) the same */
	int64_t steps_here, steady_steps;
	weft_mem_stats first_peaks, first_host_peaks, first_device_peaks;

	/* the data split, from the strategy's plan: this rank's index among
	 * the ranks the data is divided over, and their number (the dp
	 * coordinate and size under tensor parallelism; else rank and world) */
	int32_t data_rank, data_world;

	/* the options the model was built with; pipeline stages are built
	 * with the same */
	weft_model_options model_opts;
	/* the micro-batches of the step in flight (a stage's dropout key is a
	 * micro-batch's index in them); NULL outside the strategy's train_step */
	const weft_micro_batch *step_micro;
	size_t step_n_micro;
	/* the step timeline (--trace), and the measured pipeline bubble: its
	 * sum over the steps after the first, their count, and the first's */
	struct weft_timeline *timeline;
	double bubble_sum, bubble_first;
	int64_t bubble_steps;

	/* 16-mixed's loss scaler (saved in checkpoints); its scale is 1 under
	 * the other precisions */
	weft_loss_scaler scaler;
	/* the strategy's grads_check calls in the step in flight, and whether
	 * the last found an overflow (the step is skipped) */
	int64_t step_grad_checks;
	int step_overflow;

	/* the host check of every batch's ids and targets (data/batch.h),
	 * from the model; all 0: the model is a plugin, nothing to check */
	weft_batch_limits limits;
	/* the deferred loss (loss_defer.c): the step in flight reads its
	 * loss (loss_wanted) or leaves each micro-batch's on the device, in
	 * slot loss_pending of loss_ring, with its step and rows on the host */
	int loss_wanted;
	weft_tensor *loss_ring;
	int64_t loss_pending;
	int64_t loss_step[WEFT_TRAINER_LOSS_RING];
	int64_t loss_rows[WEFT_TRAINER_LOSS_RING];
	float loss_host[WEFT_TRAINER_LOSS_RING];
};

/* trainer_setup.c. setup: every step of a run before the first
 * (the trainer: section, the job, plugins, model, optimizer, data, schedule,
 * strategy, callbacks, the config checks, the strategy's setup); when the
 * process must re-execute itself through the launcher instead, checks the
 * whole config once, sets t->relaunch and returns WEFT_OK. relaunch: runs
 * the job through the launcher (after teardown) and sets *exit_code to
 * the launcher's; with exit_code NULL only its refusals are checked.
 * setup_output: fit only, after a resume's checkpoint loaded: the run
 * directory, config.yaml, metrics.csv, the TensorBoard writer (rank 0;
 * collective: every rank learns the directory). print_start: rank 0's
 * banner and model summary. teardown: frees what setup made, also after
 * a failed setup. */
weft_status weft_trainer_setup(weft_trainer *t);
weft_status weft_trainer_relaunch(weft_trainer *t, int *exit_code);
weft_status weft_trainer_setup_output(weft_trainer *t);
void weft_trainer_print_start(weft_trainer *t);
void weft_trainer_teardown(weft_trainer *t);

/* loss_defer.c: the deferred training loss (its comment says when a loss
 * is read). loss_wanted: whether the step about to run (global_step + 1)
 * reads its loss. loss_keep: the loss of one micro-batch run on ctx:
 * read into *value, or, on a step that defers it, copied into the ring
 * without waiting (*value NAN). loss_flush: reads the ring's steps, fails
 * naming the first with a non-finite loss (collective when the world has
 * several ranks: every rank calls it at the same steps; `now` is the step
 * that found it); with final set, the last deferred step's loss over the
 * ranks becomes last_train_loss. val_every: validation's period in steps;
 * val_due: whether validation runs after `step` (of `epoch`, ending it
 * when epoch_done). loss_free: at teardown. */
int weft_trainer_loss_wanted(const weft_trainer *t);
weft_status weft_trainer_loss_keep(weft_trainer *t, weft_ctx *ctx, const weft_tensor *loss,
				   int64_t rows, double *value);
weft_status weft_trainer_loss_flush(weft_trainer *t, int64_t now, int final);
int64_t weft_trainer_val_every(const weft_trainer *t);
int weft_trainer_val_due(const weft_trainer *t, int64_t step, int64_t epoch, int epoch_done);
void weft_trainer_loss_free(weft_trainer *t);

/* trainer_env.c: fills t->env (the trainer's callbacks the strategy
 * drives) and creates the strategy trainer.strategy names. */
weft_status weft_trainer_setup_strategy(weft_trainer *t);
/* Gives model m (the trainer's, or a replica) trainer.activation_checkpointing;
 * a mode the model cannot take is a config error at that key. */
weft_status weft_trainer_model_act_ckpt(const weft_trainer *t, weft_model *m);

/* trainer_trace.c: the step timeline (--trace) and the pipeline bubble.
 * trace_start: every rank, before the first step (collective: aligns the
 * clocks) when opts.trace_path is set. record_step: after each train_step
 * (t0, t1: weft_trainer_now() around it): adds the step's intervals and
 * its bubble fraction. trace_finish: every rank at the end of fit
 * (collective; rank 0 writes the file). pipeline_summary: every rank
 * (collective when a bubble was measured): fills m[0..*n) with the mean
 * bubble over ranks and steps for summary.json. */
weft_status weft_trainer_trace_start(weft_trainer *t);
weft_status weft_trainer_record_step(weft_trainer *t, const weft_step_report *rep, double t0,
				     double t1);
weft_status weft_trainer_trace_finish(weft_trainer *t);
weft_status weft_trainer_pipeline_summary(weft_trainer *t, weft_metric *m, size_t *n);

/* loop.c */
weft_status weft_trainer_fit_loop(weft_trainer *t);
weft_status weft_trainer_validate(weft_trainer *t, weft_loader *loader, int64_t limit,
				  double *loss, double *acc);
weft_status weft_trainer_write_summary(weft_trainer *t);

/* summary_plan.c: `weft plan`'s bytes per memory category for this run
 * (the resident part and the working set; comm with the backend's buffers
 * where the plan knows them), -1 for a category it does not plan or when
 * the strategy gives no plan (logged at debug level). Rank 0, after the
 * peaks are read: it allocates nothing in proportion to the model. */
void weft_trainer_planned_bytes(weft_trainer *t, int64_t planned[WEFT_MEM_NUM_CATEGORIES]);
/* Warns, per category, when the measured peak (max over ranks, reached on
 * rank[c]) and the plan differ by more than 10%. */
void weft_trainer_plan_check(const int64_t planned[WEFT_MEM_NUM_CATEGORIES],
			     const weft_mem_stats *measured, const int64_t *rank);

/* callbacks.c: creates the callback plugins named under trainer.callbacks
 * (every key but the built-in model_checkpoint and early_stopping), and
 * calls one hook on all of them; hook is WEFT_CALLBACK_HOOK(X). */
weft_status weft_trainer_callbacks_create(weft_trainer *t);
weft_status weft_trainer_callbacks_call(weft_trainer *t, size_t hook, const char *checkpoint);
void weft_trainer_callbacks_free(weft_trainer *t);

/* trainer_precision.c: mixed precision. print_precision: rank 0's banner
 * lines (the autocast dtype, the loss scaler). grads_check: the
 * weft_strategy_env member (16-mixed; collective over the world).
 * scaler_step: after each train_step under 16-mixed: refuses a strategy
 * that did not call grads_check, updates the scaler, logs a skipped step
 * (rank 0) with the new scale. */
void weft_trainer_print_precision(const weft_trainer *t, FILE *out);
weft_status weft_trainer_grads_check(void *trainer, const float *const *arrays,
				     const int64_t *lens, size_t n, int *skip);
weft_status weft_trainer_scaler_step(weft_trainer *t);
/* The 16-bit weight copy (trainer.weight_copy). copy_setup: with 16-bit
 * activations and a strategy without gather_params and plan (single, dp,
 * ddp: the whole parameters in the model's flat buffer at all times),
 * allocates the copy and makes t->ctx read it; fills t->env's
 * params_copy; before the strategy's create. copy_refresh: rounds every
 * weight into it (one conversion; nothing when none is kept): after
 * setup, after a checkpoint's weights are loaded, and after a train_step
 * whose report does not say copy_refreshed. */
weft_status weft_trainer_copy_setup(weft_trainer *t);
weft_status weft_trainer_copy_refresh(weft_trainer *t);

/* checkpoint.c */
weft_status weft_trainer_save_checkpoint(weft_trainer *t, const char *reason);
weft_status weft_trainer_load_checkpoint(weft_trainer *t, const char *dir, int weights_only);
weft_status weft_trainer_find_resume(weft_trainer *t, char *out, size_t len, int *found);
/* Rank 0: removes leftovers of interrupted checkpoint saves and removals
 * (runlog/atomic_dir.h) from every version of this run name; a no-op on
 * other ranks. Failures are logged as warnings. */
void weft_trainer_clean_stale_checkpoints(weft_trainer *t);

#endif /* WEFT_TRAIN_TRAINER_IMPL_H */
