/* The trainer's entry: one run from a resolved config. weft_trainer_run
 * sets up (trainer_setup.c), then evaluates a checkpoint (validate, test)
 * or resumes and runs the fit loop (loop.c, checkpoints in checkpoint.c),
 * and tears down. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer_impl.h"

static weft_status run(weft_trainer *t)
{
	char resume[WEFT_TRAINER_PATH] = "";
	int found = 0;
	weft_status st;

	st = weft_trainer_setup(t);
	if (st || t->relaunch)
		return st;
	if (t->opts.mode != WEFT_RUN_FIT) {
		double loss = 0, acc = 0;

		/* Lightning's test loop runs on the test split alone: scoring
		 * the validation data under the name test would mislead */
		if (t->opts.mode == WEFT_RUN_TEST && !t->data->val_is_test)
			return weft_error_set(WEFT_ERR_CONFIG,
					      "weft test: data '%s' has no test split (its held-out "
					      "data is the validation split, which `weft validate` "
					      "scores); only a dataset with its own test files has one "
					      "(fashion_mnist with data.val_fraction 0)",
					      t->data->class_name);
		st = weft_trainer_load_checkpoint(t, t->opts.ckpt_path, 1);
		if (st)
			return st;
		if (!t->val_loader)
			return weft_error_set(WEFT_ERR_CONFIG,
					      "data '%s' has no %s split to evaluate on",
					      t->data->class_name,
					      t->opts.mode == WEFT_RUN_TEST ? "test" : "validation");
		st = weft_trainer_validate(t, t->val_loader, t->val_batches, &loss, &acc);
		if (st)
			return st;
		if (t->rank == 0) {
			const char *pre = t->opts.mode == WEFT_RUN_TEST ? "test" : "val";

			printf("%s_loss %.6f\n", pre, loss);
			if (weft_model_get_class(t->model) != WEFT_MODEL_GPT)
				printf("%s_acc %.6f\n", pre, acc);
		}
		return WEFT_OK;
	}
	weft_trainer_clean_stale_checkpoints(t);
	if (t->tc.resume) {
		if (!strcmp(t->tc.resume, "auto")) {
			st = weft_trainer_find_resume(t, resume, sizeof(resume), &found);
			if (st)
				return st;
		} else {
			snprintf(resume, sizeof(resume), "%s", t->tc.resume);
			found = 1;
		}
	}
	/* The checkpoint is checked before the run directory is made, so that
	 * a bad one leaves no empty version behind. */
	if (found) {
		st = weft_trainer_load_checkpoint(t, resume, 0);
		if (st)
			return st;
	}
	st = weft_trainer_setup_output(t);
	if (st)
		return st;
	if (found && t->rank == 0)
		fprintf(stderr, "resumed from %s at step %lld (epoch %lld)\n", resume,
			(long long)t->global_step, (long long)t->epoch);
	weft_trainer_print_start(t);
	st = weft_trainer_trace_start(t);
	if (st)
		return st;
	st = weft_trainer_callbacks_call(t, WEFT_CALLBACK_HOOK(on_fit_start), NULL);
	if (st)
		return st;
	st = weft_trainer_fit_loop(t);
	if (st)
		return st;
	st = weft_trainer_callbacks_call(t, WEFT_CALLBACK_HOOK(on_fit_end), NULL);
	if (st)
		return st;
	st = weft_trainer_trace_finish(t);
	if (st)
		return st;
	return weft_trainer_write_summary(t);
}

weft_status weft_trainer_run(weft_config *cfg, const weft_run_opts *opts, int *exit_code)
{
	weft_trainer *t = calloc(1, sizeof(*t));
	weft_status st;

	*exit_code = 0;
	if (!t)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory starting the trainer");
	t->cfg = cfg;
	t->root = weft_config_root(cfg);
	t->opts = *opts;
	t->last_val_loss = NAN;
	t->last_val_acc = NAN;
	t->last_train_loss = NAN;
	t->last_ckpt_step = -1;
	t->val_step = -1;
	t->t_start = weft_trainer_now();
	if (getenv("WEFT_FAULT_KILL_AT_STEP"))
		t->fault_kill_step = strtoll(getenv("WEFT_FAULT_KILL_AT_STEP"), NULL, 10);
	st = run(t);
	weft_trainer_teardown(t);
	if (!st && t->relaunch)
		st = weft_trainer_relaunch(t, exit_code);
	free(t);
	return st;
}
