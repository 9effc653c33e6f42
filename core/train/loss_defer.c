/* The deferred training loss: a step's loss stays on the device until the
 * trainer uses it (issue 25: a GPU runs ahead of the host only when nothing
 * in a step waits for it).
 *
 * Before each step the trainer decides whether it will use the step's loss
 * (weft_trainer_loss_wanted): at a logging step (trainer.log_every_n_steps,
 * and step 1), at a validation, a checkpoint, an epoch's end, the last step
 * of max_steps, with callback plugins (they see train_loss every step),
 * under strategy dp's replicas, and when the ring below is full. Those steps
 * run as before: forward_backward reads each micro-batch's loss and the
 * strategy reduces it over the ranks. Every other step's micro-batch losses
 * are copied on the device (no wait) into loss_ring, the strategy gets NAN
 * for them, and the trainer ignores the step's reported loss.
 *
 * The ring is read in one copy at the next wanted step (or at the end of
 * the fit): a non-finite loss among its steps stops the run there, naming
 * the step it happened at, so a diverged run stops at most one logging
 * interval late; every rank takes the same decision (an all-gather of each
 * rank's first bad step). When the fit ends after a step that was not
 * wanted (trainer.max_time), that step's loss is computed from the ring as
 * the strategies compute it (the row-weighted mean, summed over the ranks),
 * so summary.json's train_loss is the last step's. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "train/trainer_impl.h"

static int64_t val_every_steps(const weft_trainer *t)
{
	int64_t k;

	if (t->tc.val_check_interval.is_count)
		k = (t->tc.val_check_interval.count + t->tc.accumulate - 1) / t->tc.accumulate;
	else
		k = (int64_t)floor(t->tc.val_check_interval.frac * (double)t->steps_per_epoch);
	return k < 1 ? 1 : k;
}

int64_t weft_trainer_val_every(const weft_trainer *t)
{
	return val_every_steps(t);
}

int weft_trainer_val_due(const weft_trainer *t, int64_t step, int64_t epoch, int epoch_done)
{
	int64_t every = val_every_steps(t), in_epoch = step - epoch * t->steps_per_epoch;

	if (t->tc.check_val_every_n_epoch == 0)
		return step % every == 0;
	return in_epoch > 0 && in_epoch % every == 0 &&
	       (epoch + 1) % t->tc.check_val_every_n_epoch == 0 && !epoch_done;
}

int weft_trainer_loss_wanted(const weft_trainer *t)
{
	int64_t s = t->global_step + 1; /* the step about to run */
	int ends_epoch = t->next_batch + t->tc.accumulate >= t->batches_per_epoch;

	/* a model plugin's loss may not be an F32 scalar: read as it comes */
	return s == 1 || s % t->tc.log_every_n_steps == 0 ||
	       weft_model_get_class(t->model) == WEFT_MODEL_PLUGIN ||
	       t->loss_pending + t->tc.accumulate > WEFT_TRAINER_LOSS_RING ||
	       t->n_callbacks > 0 || t->tc.fast_dev_run > 0 || ends_epoch ||
	       (t->tc.max_steps > 0 && s >= t->tc.max_steps) ||
	       (t->val_loader && t->val_batches > 0 &&
		weft_trainer_val_due(t, s, t->epoch, 0)) ||
	       (t->tc.ckpt.enabled && t->tc.ckpt.every_n_train_steps > 0 &&
		s % t->tc.ckpt.every_n_train_steps == 0) ||
	       (weft_trainer_one_process_strategy(t) && t->tc.devices > 1);
}

weft_status weft_trainer_loss_keep(weft_trainer *t, weft_ctx *ctx, const weft_tensor *loss,
				   int64_t rows, double *value)
{
	weft_tensor slot;
	weft_status st;
	float v;

	if (!t->loss_ring && ctx == t->ctx) {
		/* made at the first micro-batch (a wanted step): no step after
		 * the first allocates */
		int64_t n = WEFT_TRAINER_LOSS_RING;

		st = weft_tensor_alloc("trainer.loss_ring", WEFT_F32, 1, &n, weft_ctx_device(ctx),
				       WEFT_MEM_OTHER, &t->loss_ring);
		if (st)
			return weft_error_wrap(st, "the trainer's ring of deferred losses");
	}
	if (t->loss_wanted) {
		st = weft_tensor_copy_to_host(loss, &v, sizeof(v));
		*value = v;
		return st;
	}
	/* a deferred step runs on the trainer's context (dp's replicas read
	 * every step) with room in the ring (loss_wanted saw to both) */
	if (ctx != t->ctx || !t->loss_ring || loss->dtype != WEFT_F32 ||
	    weft_tensor_numel(loss) != 1 || t->loss_pending >= WEFT_TRAINER_LOSS_RING)
		return weft_error_set(WEFT_ERR_INTERNAL, "trainer: a deferred step's loss (%s, %lld "
				      "elements) cannot go to the ring (%lld of %d slots used)",
				      weft_dtype_name((weft_dtype)loss->dtype),
				      (long long)weft_tensor_numel(loss), (long long)t->loss_pending,
				      WEFT_TRAINER_LOSS_RING);
	st = weft_tensor_init(&slot, WEFT_F32, 0, NULL, weft_ctx_device(ctx),
			      (float *)t->loss_ring->data + t->loss_pending);
	if (!st)
		st = weft_tensor_copy(&slot, loss); /* queued after the loss, not waited for */
	if (st)
		return st;
	t->loss_step[t->loss_pending] = t->global_step + 1;
	t->loss_rows[t->loss_pending] = rows;
	t->loss_pending++;
	*value = NAN;
	return WEFT_OK;
}

/* The row-weighted mean loss of the ring's step `step`, from slot *i on
 * (advanced past the step), as weft_step_accumulate sums it. */
static double step_loss(const weft_trainer *t, int64_t *i, double *sum, double *rows)
{
	int64_t step = t->loss_step[*i];

	*sum = *rows = 0.0;
	for (; *i < t->loss_pending && t->loss_step[*i] == step; (*i)++) {
		*sum += (double)t->loss_host[*i] * (double)t->loss_rows[*i];
		*rows += (double)t->loss_rows[*i];
	}
	return *sum / *rows;
}

/* The error for a non-finite loss at `step` on `rank`, found at step `now`. */
static weft_status diverged(const weft_trainer *t, int64_t step, int64_t rank, double value,
			    int64_t now)
{
	char on[96] = "", late[192] = "";

	if (t->world > 1)
		snprintf(on, sizeof(on), " on rank %lld", (long long)rank);
	if (step < now)
		snprintf(late, sizeof(late), " (found at step %lld: off the logging steps the "
			 "loss is read every trainer.log_every_n_steps = %lld steps)",
			 (long long)now, (long long)t->tc.log_every_n_steps);
	if (isnan(value) && rank != t->rank)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "the training loss%s is not finite at "
				      "step %lld%s: training diverged; lower optimizer.lr or set "
				      "trainer.gradient_clip_val", on, (long long)step, late);
	return weft_error_set(WEFT_ERR_INVALID_ARG, "the training loss%s is %g at step %lld%s: "
			      "training diverged; lower optimizer.lr or set "
			      "trainer.gradient_clip_val", on, value, (long long)step, late);
}

weft_status weft_trainer_loss_flush(weft_trainer *t, int64_t now, int final)
{
	int64_t bad = INT64_MAX, i = 0, last = 0, *all = NULL;
	double bad_value = NAN, sum = 0.0, rows = 0.0, v;
	weft_tensor read;
	weft_status st;

	if (t->loss_pending == 0)
		return WEFT_OK;
	/* one copy for every step since the last read */
	st = weft_tensor_init(&read, WEFT_F32, 1, &t->loss_pending, t->loss_ring->device,
			      t->loss_ring->data);
	if (!st)
		st = weft_tensor_copy_to_host(&read, t->loss_host,
					      (size_t)t->loss_pending * sizeof(float));
	if (st)
		return weft_error_wrap(st, "reading the deferred training losses");
	while (i < t->loss_pending) {
		last = i;
		v = step_loss(t, &i, &sum, &rows);
		if (!isfinite(v) && bad == INT64_MAX) {
			bad = t->loss_step[last];
			bad_value = v;
		}
	}
	t->loss_pending = 0;
	if (t->world > 1) {
		/* every rank stops at the same step: the earliest bad one */
		int64_t mine = bad, who = t->rank;

		all = calloc((size_t)t->world, sizeof(*all));
		if (!all)
			return weft_error_set(WEFT_ERR_NOMEM, "out of memory checking the losses");
		st = weft_trainer_all_gather_i64(t, &mine, 1, all);
		for (int r = 0; !st && r < t->world; r++)
			if (all[r] < bad || (all[r] == bad && r < who)) {
				bad = all[r];
				who = r;
			}
		free(all);
		if (st)
			return weft_error_wrap(st, "agreeing on the deferred losses' check");
		if (bad != INT64_MAX)
			return diverged(t, bad, who, who == t->rank ? bad_value : NAN, now);
	} else if (bad != INT64_MAX) {
		return diverged(t, bad, t->rank, bad_value, now);
	}
	if (!final)
		return WEFT_OK;
	/* the fit ended on a deferred step: its loss over the ranks, as the
	 * strategies reduce it (sums of loss x rows and of rows) */
	if (t->pg) {
		double red[2] = { sum, rows };
		weft_comm_buf b = { .data = red, .count = 2, .dtype = WEFT_COMM_F64 };

		st = weft_pg_all_reduce(t->pg, &b, &b, WEFT_COMM_SUM, NULL);
		if (st)
			return weft_error_wrap(st, "the last step's loss over the ranks");
		sum = red[0];
		rows = red[1];
	}
	t->last_train_loss = sum / rows;
	return WEFT_OK;
}

void weft_trainer_loss_free(weft_trainer *t)
{
	weft_tensor_free(t->loss_ring);
	t->loss_ring = NULL;
	t->loss_pending = 0;
}
