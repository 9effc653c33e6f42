/* train/trainer.h - `weft fit`, `weft validate`, `weft test`.
 *
 * The trainer owns one run: it finds this process's place in the job
 * (re-executing itself through the launcher when trainer.devices x
 * trainer.num_nodes > 1 and it was not launched), loads the plugins the
 * config names, builds the model, the data, the optimizer, the schedule
 * and the strategy, checks the whole config strictly, and runs the loop
 * with Lightning's behaviour: progress, validation, logging, checkpoints,
 * early stopping, exact resume.
 */
#ifndef WEFT_TRAIN_TRAINER_H
#define WEFT_TRAIN_TRAINER_H

#include "weft/config.h"
#include "weft/status.h"

typedef enum weft_run_mode {
	WEFT_RUN_FIT = 0,
	WEFT_RUN_VALIDATE = 1,  /* evaluate a checkpoint on the validation data */
	WEFT_RUN_TEST = 2       /* evaluate a checkpoint on the test data */
} weft_run_mode;

typedef struct weft_run_opts {
	weft_run_mode mode;
	const char *config_path;  /* for the run name and relative paths */
	const char *ckpt_path;    /* validate/test: the checkpoint directory */
	char *const *argv;        /* this process's argv, to re-execute through the launcher */
	/* fit only (--trace): every rank records its step timeline and rank 0
	 * writes all of them to this Chrome-trace file at the end
	 * (core/pipeline/timeline.h); NULL: none */
	const char *trace_path;
} weft_run_opts;

/* Runs the job the config describes. Returns WEFT_OK after a finished run
 * (max_epochs / max_steps / max_time reached, or early stopping), or a
 * status with the last error set: a config error at file:line:col, a
 * missing dataset or plugin, a corrupt checkpoint, a failed peer. When the
 * run was re-executed through the launcher, *exit_code is the launcher's
 * exit code (the children printed their own errors) and the return is
 * WEFT_OK; otherwise *exit_code is 0. */
weft_status weft_trainer_run(weft_config *cfg, const weft_run_opts *opts, int *exit_code);

/* Checks the whole config without running anything: reads every section
 * as a run of `world` ranks would (0: the config's trainer.devices x
 * trainer.num_nodes), building the model on the CPU and opening the data,
 * then reports the first unknown key. The strategy's and the comm
 * backend's own options are left to the ranks. Marks the config's keys as
 * read. Errors: as weft_trainer_run's setup (WEFT_ERR_CONFIG at
 * file:line:col, a missing dataset or plugin). */
weft_status weft_trainer_check_config(weft_config *cfg, const weft_run_opts *opts, int64_t world);

#endif /* WEFT_TRAIN_TRAINER_H */
