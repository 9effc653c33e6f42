/* The fit loop: micro-batches into optimizer steps, validation, logging,
 * checkpoints, early stopping, the run summary. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runlog/report.h"
#include "tp/tp.h"
#include "train/early_stop.h"
#include "train/trainer_impl.h"
#include "weft/log.h"

/* A micro-batch copied out of the loader's ring (the strategy holds every
 * micro-batch of a step at once; the ring reuses its slots). */
typedef struct held_batch {
	weft_tensor x, y;
	void *xbuf, *ybuf;
	size_t xcap, ycap;
} held_batch;

static weft_status hold(held_batch *h, const weft_host_batch *b)
{
	size_t xb = b->x.capacity, yb = b->y.capacity;
	size_t esz = 4; /* F32 and I32 host arrays */
	int64_t xn = 1, yn = 1;
	weft_status st;

	for (int i = 0; i < b->x.ndim; i++)
		xn *= b->x.shape[i];
	for (int i = 0; i < b->y.ndim; i++)
		yn *= b->y.shape[i];
	if (!h->xbuf || h->xcap < xb) {
		weft_mem_free(h->xbuf);
		h->xbuf = weft_mem_alloc(WEFT_MEM_OTHER, xb);
		h->xcap = xb;
	}
	if (!h->ybuf || h->ycap < yb) {
		weft_mem_free(h->ybuf);
		h->ybuf = weft_mem_alloc(WEFT_MEM_OTHER, yb);
		h->ycap = yb;
	}
	if (!h->xbuf || !h->ybuf)
		return WEFT_ERR_NOMEM;
	memcpy(h->xbuf, b->x.data, (size_t)xn * esz);
	memcpy(h->ybuf, b->y.data, (size_t)yn * esz);
	st = weft_tensor_init(&h->x, b->x.dtype == WEFT_HOST_F32 ? WEFT_F32 : WEFT_I32, b->x.ndim,
			      b->x.shape, WEFT_CPU, h->xbuf);
	if (st)
		return st;
	return weft_tensor_init(&h->y, b->y.dtype == WEFT_HOST_F32 ? WEFT_F32 : WEFT_I32,
				b->y.ndim, b->y.shape, WEFT_CPU, h->ybuf);
}

static void held_free(held_batch *h, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		weft_mem_free(h[i].xbuf);
		weft_mem_free(h[i].ybuf);
	}
}

static int64_t tokens_per_row(const weft_host_batch *b)
{
	return b->y.ndim >= 2 ? b->y.shape[1] : 1;
}

static void log_metrics(weft_trainer *t, int64_t step, const weft_metric *m, size_t n)
{
	double wall = (double)time(NULL);

	if (t->rank != 0)
		return;
	if (t->csv && weft_csv_log(t->csv, step, m, n) != WEFT_OK)
		weft_log(WEFT_LOG_WARN, "metrics.csv: %s", weft_error_last());
	for (size_t i = 0; t->tb && i < n; i++) {
		if (weft_tb_add_scalar(t->tb, m[i].name, step, (float)m[i].value, wall) != WEFT_OK)
			weft_log(WEFT_LOG_WARN, "tensorboard: %s", weft_error_last());
	}
}

weft_status weft_trainer_validate(weft_trainer *t, weft_loader *loader, int64_t limit,
				  double *loss, double *acc)
{
	weft_eval_report total = { .struct_size = sizeof(total) };
	held_batch h = { 0 };
	weft_status st;

	*loss = NAN;
	*acc = NAN;
	st = weft_loader_start_epoch(loader, 0, 0);
	for (int64_t i = 0; !st && i < limit; i++) {
		const weft_host_batch *b = NULL;
		weft_eval_report rep = { .struct_size = sizeof(rep) };
		weft_micro_batch mb;

		st = weft_loader_next(loader, &b);
		if (st || !b)
			break;
		st = weft_batch_check_indices(b, &t->limits);
		if (!st)
			st = hold(&h, b);
		if (st)
			break;
		mb = (weft_micro_batch){ .data = { .inputs = &h.x, .targets = &h.y },
					 .rows = b->rows, .row_offset = 0 };
		st = t->strat_ops->eval_step(t->strat, &mb, &rep);
		total.loss_sum += rep.loss_sum;
		total.rows += rep.rows;
		total.correct += rep.correct;
		total.counted += rep.counted;
	}
	held_free(&h, 1);
	if (st)
		return st;
	if (total.rows > 0)
		*loss = total.loss_sum / (double)total.rows;
	if (total.counted > 0)
		*acc = (double)total.correct / (double)total.counted;
	return WEFT_OK;
}

/* The monitored value: val_loss, val_acc or train_loss; NAN if unknown. */
static double monitored(const weft_trainer *t, const char *name)
{
	if (!name)
		return NAN;
	if (!strcmp(name, "val_loss"))
		return t->last_val_loss;
	if (!strcmp(name, "val_acc"))
		return t->last_val_acc;
	if (!strcmp(name, "train_loss"))
		return t->last_train_loss;
	return NAN;
}

static weft_status run_validation(weft_trainer *t)
{
	weft_metric m[2];
	size_t n = 0;
	double v;
	weft_status st;

	if (!t->val_loader || t->val_batches < 1)
		return WEFT_OK;
	st = weft_trainer_validate(t, t->val_loader, t->val_batches, &t->last_val_loss,
				   &t->last_val_acc);
	if (st)
		return st;
	t->have_val = 1;
	t->val_step = t->global_step;
	m[n++] = (weft_metric){ "val_loss", t->last_val_loss };
	if (!isnan(t->last_val_acc))
		m[n++] = (weft_metric){ "val_acc", t->last_val_acc };
	log_metrics(t, t->global_step, m, n);
	st = weft_trainer_callbacks_call(t, WEFT_CALLBACK_HOOK(on_validation_end), NULL);
	if (st)
		return st;
	if (t->rank == 0 && !t->tc.enable_progress_bar) {
		fprintf(stderr, "step %lld: val_loss %.4f", (long long)t->global_step,
			t->last_val_loss);
		if (!isnan(t->last_val_acc))
			fprintf(stderr, " val_acc %.4f", t->last_val_acc);
		fputc('\n', stderr);
	}
	if ((st = weft_trainer_sample_after_val(t)))
		return st;
	if (t->tc.early.enabled) {
		v = monitored(t, t->tc.early.monitor);
		if (isnan(v))
			return weft_error_set(WEFT_ERR_CONFIG,
					      "early_stopping.monitor '%s' is not a metric this run "
					      "logs (val_loss, val_acc, train_loss)",
					      t->tc.early.monitor);
		if (weft_early_stop_update(&t->tc.early, v, &t->best_score, &t->bad_checks)) {
			t->stop = 1;
			t->stop_reason = WEFT_STOP_EARLY;
			if (t->rank == 0)
				fprintf(stderr, "early stopping: %s did not improve in the last "
					"%lld checks (best %.6f)\n", t->tc.early.monitor,
					(long long)t->bad_checks, t->best_score);
		}
	}
	return WEFT_OK;
}

static int time_is_up(const weft_trainer *t)
{
	return t->tc.max_time_s > 0 && weft_trainer_now() - t->t_start >= t->tc.max_time_s;
}

/* LearningRateMonitor's column, as Lightning names it: "lr-" and the
 * optimizer's class name (lr-AdamW, lr-SGD, ...; a plugin's own name). */
static const char *lr_monitor_name(const weft_trainer *t, char *buf, size_t len)
{
	static const char *const names[][2] = { { "adamw", "AdamW" }, { "adam", "Adam" },
						{ "sgd", "SGD" }, { "lion", "Lion" } };
	const char *n = t->optim_ops->head.name;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(n, names[i][0]))
			n = names[i][1];
	snprintf(buf, len, "lr-%s", n);
	return buf;
}

/* One optimizer step: up to `accumulate` micro-batches from the loader. */
static weft_status train_one_step(weft_trainer *t, held_batch *held, int *epoch_done)
{
	weft_micro_batch micro[WEFT_TRAINER_MAX_MICRO];
	weft_step_report rep = { .struct_size = sizeof(rep), .grad_norm = -1 };
	weft_step_input in = { .struct_size = sizeof(in), .micro = micro };
	int64_t rows = 0, tokens = 0, row_len = 1;
	double w0 = weft_loader_wait_seconds(t->train_loader), t0;
	double t_fetch = weft_trainer_now(); /* the step's time for throughput starts here */
	int64_t pending;
	int read;
	weft_status st;

	/* decided before the batches are drawn: whether this step ends the epoch */
	t->loss_wanted = weft_trainer_loss_wanted(t);
	for (int64_t k = 0; k < t->tc.accumulate && t->next_batch < t->batches_per_epoch; k++) {
		const weft_host_batch *b = NULL;

		st = weft_loader_next(t->train_loader, &b);
		if (st)
			return st;
		if (!b)
			break;
		st = weft_batch_check_indices(b, &t->limits);
		if (!st)
			st = hold(&held[k], b);
		if (st)
			return st;
		micro[k] = (weft_micro_batch){ .data = { .inputs = &held[k].x,
							 .targets = &held[k].y },
					       .rows = b->rows,
					       .row_offset = (int64_t)t->data_rank * b->rows };
		rows += b->rows;
		row_len = tokens_per_row(b);
		tokens += b->rows * row_len;
		in.n_micro++;
		t->next_batch++;
	}
	t->data_wait_s += weft_loader_wait_seconds(t->train_loader) - w0;
	if (t->next_batch >= t->batches_per_epoch)
		*epoch_done = 1;
	if (in.n_micro == 0) {
		*epoch_done = 1;
		return WEFT_OK;
	}
	if (!t->loss_wanted) /* the strategy need not reduce it (loss_defer.c) */
		in.flags |= WEFT_STEP_LOSS_DEFERRED;
	/* 16-mixed: the loss is scaled (trainer_env.c), the gradients divided back
	 * as they are read; the optimizer counts only the steps it took, as
	 * torch's does when GradScaler skips one */
	in.optim = (weft_optim_step_info){
		.struct_size = sizeof(weft_optim_step_info),
		.step = t->global_step + 1 - t->scaler.skipped,
		.lr = weft_lr_schedule_at(&t->sched, t->global_step),
		.grad_scale = 1.0 / t->scaler.scale,
	};
	t0 = weft_trainer_now();
	t->micro_in_step = 0;
	t->step_micro = micro;
	t->step_n_micro = in.n_micro;
	t->step_grad_checks = 0;
	t->step_overflow = 0;
	pending = t->loss_pending;
	st = t->strat_ops->train_step(t->strat, &in, &rep);
	t->step_micro = NULL;
	/* the next forward's 16-bit weights: the step's kernel wrote them, or
	 * one conversion of the new weights does */
	if (!st && !rep.copy_refreshed)
		st = weft_trainer_copy_refresh(t);
	if (st)
		return st;
	/* the step's loss was read (rep.loss is the global batch's) unless its
	 * micro-batches went to the ring (loss_defer.c); a read step first
	 * checks the steps the ring holds */
	read = t->loss_pending == pending;
	if (read && (st = weft_trainer_loss_flush(t, t->global_step + 1, 0)))
		return st;
	if (t->tc.loss_scale.enabled) {
		st = weft_trainer_scaler_step(t);
		if (st)
			return st;
	}
	st = weft_trainer_record_step(t, &rep, t0, weft_trainer_now());
	if (st)
		return st;
	t->train_seconds += weft_trainer_now() - t0;
	if (read && !isfinite(rep.loss))
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "the training loss is %g at step %lld: training diverged; "
				      "lower optimizer.lr or set trainer.gradient_clip_val",
				      rep.loss, (long long)t->global_step + 1);
	t->global_step++;
	if (++t->steps_here == 2) {
		weft_mem_get_stats(&t->first_peaks);
		weft_mem_get_split_stats(&t->first_host_peaks, &t->first_device_peaks);
		weft_mem_reset_peaks();
	} else if (t->steps_here > 2) {
		t->steady_steps++;
	}
	if (read)
		t->last_train_loss = rep.loss;
	t->last_lr = in.optim.lr;
	if (t->fault_kill_step > 0 && t->global_step == t->fault_kill_step &&
	    t->denv.restart_count == 0) {
		weft_log(WEFT_LOG_WARN, "WEFT_FAULT_KILL_AT_STEP=%lld: killing this rank",
			 (long long)t->fault_kill_step);
		raise(SIGKILL);
	}
	t->samples_seen += rows * t->data_world;
	t->tokens_seen += tokens * t->data_world;
	t->compute_ns += rep.compute_ns;
	t->comm_ns += rep.comm_ns;
	t->exposed_ns += rep.exposed_comm_ns;
	t->comm_bytes += rep.comm_bytes;
	if (t->tput.per_token && t->tput.flops_per_item == 0) /* the sequence length: now known */
		t->tput.flops_per_item = weft_throughput_flops_per_token(
			t->model, row_len, weft_tp_whole_numel(weft_model_params(t->model)));
	weft_throughput_add(&t->tput, (double)(t->tput.per_token ? tokens : rows) * t->data_world,
			    weft_trainer_now() - t_fetch);
	if (t->tc.lr_monitor.enabled && t->tc.lr_monitor.per_epoch &&
	    t->global_step - t->epoch * t->steps_per_epoch == 1) {
		char name[64];
		weft_metric lm = { lr_monitor_name(t, name, sizeof(name)), in.optim.lr };

		log_metrics(t, t->global_step, &lm, 1);
	}
	if (t->global_step % t->tc.log_every_n_steps == 0 || t->global_step == 1) {
		weft_metric m[10];
		size_t n = 0;
		char name[64];

		m[n++] = (weft_metric){ "train_loss", rep.loss };
		m[n++] = (weft_metric){ "lr", in.optim.lr };
		m[n++] = (weft_metric){ "epoch", (double)t->epoch };
		if (rep.grad_norm >= 0)
			m[n++] = (weft_metric){ "grad_norm", rep.grad_norm };
		if (t->tc.loss_scale.enabled) /* the scale the next step uses */
			m[n++] = (weft_metric){ "loss_scale", t->scaler.scale };
		if (t->tc.lr_monitor.enabled && !t->tc.lr_monitor.per_epoch)
			m[n++] = (weft_metric){ lr_monitor_name(t, name, sizeof(name)), in.optim.lr };
		if (t->tc.throughput_monitor)
			n += weft_throughput_metrics(&t->tput, m + n);
		log_metrics(t, t->global_step, m, n);
	}
	return WEFT_OK;
}

static void show_progress(weft_trainer *t)
{
	weft_metric m[5];
	size_t n = 0;

	m[n++] = (weft_metric){ "loss", t->last_train_loss };
	if (t->have_val) {
		m[n++] = (weft_metric){ "val_loss", t->last_val_loss };
		if (!isnan(t->last_val_acc))
			m[n++] = (weft_metric){ "val_acc", t->last_val_acc };
	}
	n += weft_throughput_progress(&t->tput, m + n);
	/* the bar counts the epoch's steps, as Lightning's (every epoch has
	 * steps_per_epoch steps, so the epoch began at epoch * that) */
	weft_progress_update(&t->progress, t->global_step - t->epoch * t->steps_per_epoch, m, n);
}

/* The epoch's final state with the latest metrics, on its own line. */
static void show_progress_end(weft_trainer *t)
{
	weft_metric m[5] = { { "loss", t->last_train_loss },
			     { "val_loss", t->last_val_loss },
			     { "val_acc", t->last_val_acc } };
	size_t n = !t->have_val ? 1 : isnan(t->last_val_acc) ? 2 : 3;

	n += weft_throughput_progress(&t->tput, m + n);
	weft_progress_end_epoch(&t->progress, m, n);
}

static int step_ckpt_due(const weft_trainer *t)
{
	return t->tc.ckpt.enabled && t->tc.ckpt.every_n_train_steps > 0 &&
	       t->global_step % t->tc.ckpt.every_n_train_steps == 0;
}

/* Rank 0's last line of a fit, in Lightning's words. */
static void print_stop_reason(const weft_trainer *t)
{
	if (t->rank != 0)
		return;
	switch (t->stop_reason) {
	case WEFT_STOP_MAX_STEPS:
		fprintf(stderr, "`Trainer.fit` stopped: `max_steps=%lld` reached.\n",
			(long long)t->tc.max_steps);
		break;
	case WEFT_STOP_MAX_EPOCHS:
		fprintf(stderr, "`Trainer.fit` stopped: `max_epochs=%lld` reached.\n",
			(long long)t->tc.max_epochs);
		break;
	case WEFT_STOP_MAX_TIME:
		fprintf(stderr, "`Trainer.fit` stopped: `max_time` reached after %.0f s.\n",
			weft_trainer_now() - t->t_start);
		break;
	case WEFT_STOP_EARLY:
		fprintf(stderr, "`Trainer.fit` stopped: early stopping (%s did not improve in "
			"the last %lld validations).\n", t->tc.early.monitor,
			(long long)t->bad_checks);
		break;
	case WEFT_STOP_CALLBACK:
		fprintf(stderr, "`Trainer.fit` stopped: a callback set should_stop.\n");
		break;
	case WEFT_STOP_NONE:
		break;
	}
}

/* Lightning's sanity check: num_sanity_val_steps validation batches
 * before the first step (all with -1), so a broken validation fails in
 * seconds rather than after an epoch. Nothing is logged or kept, and
 * nothing of training changes: evaluation reads the parameters only. */
static weft_status sanity_check(weft_trainer *t)
{
	int64_t n = t->tc.num_sanity_val_steps;
	double loss, acc;
	weft_status st;

	if (n == 0 || !t->val_loader || t->val_batches < 1)
		return WEFT_OK;
	if (n < 0 || n > t->val_batches)
		n = t->val_batches;
	st = weft_trainer_validate(t, t->val_loader, n, &loss, &acc);
	if (st)
		return weft_error_wrap(st, "the sanity check (trainer.num_sanity_val_steps %lld "
				       "validation batches before training)", (long long)n);
	if (t->rank == 0)
		fprintf(stderr, "Sanity Checking: %lld/%lld validation batches ran (not logged)\n",
			(long long)n, (long long)n);
	return WEFT_OK;
}

/* The devices this process drives: one, or strategy dp's replicas. */
static int64_t devices_per_process(const weft_trainer *t)
{
	return weft_trainer_one_process_strategy(t) && t->tc.devices > 1 ? t->tc.devices : 1;
}

/* The peak FLOP/s of one device, from trainer.peak_flops or, on the CPU,
 * derived from /proc/cpuinfo; 0 when unknown. `how` says where it came from. */
static double device_peak_flops(const weft_trainer *t, char *how, size_t len)
{
	char info[16384];
	size_t n = 0;
	FILE *f;

	if (t->tc.peak_flops > 0) {
		snprintf(how, len, "trainer.peak_flops");
		return t->tc.peak_flops;
	}
	if (t->tc.device.type != WEFT_DEVICE_CPU) {
		snprintf(how, len, "no default peak for a %s device", t->tc.accelerator);
		return 0.0;
	}
	f = fopen("/proc/cpuinfo", "r");
	if (f) {
		n = fread(info, 1, sizeof(info) - 1, f);
		fclose(f);
	}
	info[n] = '\0';
	return weft_cpu_peak_flops(f ? info : NULL, weft_cpu_get_threads(), how, len);
}

/* Sets up tokens/s and MFU for this fit and says, once, what MFU is
 * measured against. */
static void throughput_start(weft_trainer *t)
{
	int lm = weft_model_get_class(t->model) == WEFT_MODEL_GPT;
	int64_t devices = (int64_t)t->world * devices_per_process(t);
	char how[256];
	double peak = device_peak_flops(t, how, sizeof(how));

	/* an MLP's FLOPs per sample need no sequence length; a GPT's wait
	 * for the first batch (train_one_step) */
	weft_throughput_init(&t->tput, lm,
			     lm ? 0.0 : weft_throughput_flops_per_token(
					       t->model, 1,
					       weft_tp_whole_numel(weft_model_params(t->model))),
			     peak * (double)devices);
	if (t->rank != 0 || t->tc.fast_dev_run > 0)
		return;
	if (peak > 0)
		fprintf(stderr, "MFU: model FLOPs over a peak of %.4g GFLOP/s per device x %lld "
			"device%s (%s); trainer.peak_flops sets another\n", peak / 1e9,
			(long long)devices, devices == 1 ? "" : "s", how);
	else
		fprintf(stderr, "MFU: not reported (%s); set trainer.peak_flops to one device's "
			"peak FLOP/s for an mfu column\n", how);
}

weft_status weft_trainer_fit_loop(weft_trainer *t)
{
	held_batch held[WEFT_TRAINER_MAX_MICRO];
	weft_progress_opts po = { .enabled = t->rank == 0, .tty = t->tc.enable_progress_bar ? -1 : 0,
				  .log_every = t->tc.log_every_n_steps };
	weft_status st = WEFT_OK;

	if (t->tc.accumulate > WEFT_TRAINER_MAX_MICRO)
		return weft_cfg_error(weft_cfg_get(t->tc.section, "accumulate_grad_batches"),
				      "must be at most %d", WEFT_TRAINER_MAX_MICRO);
	memset(held, 0, sizeof(held));
	if (t->tc.fast_dev_run > 0 && t->rank == 0)
		fprintf(stderr, "fast_dev_run: %lld training and %lld validation batch%s, no "
			"checkpoints, no metrics.csv or TensorBoard\n",
			(long long)t->tc.fast_dev_run, (long long)t->tc.fast_dev_run,
			t->tc.fast_dev_run == 1 ? "" : "es");
	st = sanity_check(t);
	if (st)
		return st;
	throughput_start(t);
	weft_progress_init(&t->progress, &po);
	while (!t->stop && (t->tc.max_epochs < 0 || t->epoch < t->tc.max_epochs)) {
		int epoch_done = 0;

		st = weft_loader_start_epoch(t->train_loader, t->epoch, t->next_batch);
		if (st)
			break;
		weft_progress_start_epoch(&t->progress, t->epoch, t->steps_per_epoch,
					  t->global_step - t->epoch * t->steps_per_epoch);
		while (!epoch_done && !t->stop) {
			st = train_one_step(t, held, &epoch_done);
			if (!st)
				st = weft_trainer_callbacks_call(t,
						WEFT_CALLBACK_HOOK(on_train_batch_end), NULL);
			if (st)
				goto out;
			show_progress(t);
			if (weft_trainer_val_due(t, t->global_step, t->epoch, epoch_done)) {
				st = run_validation(t);
				if (st)
					goto out;
			}
			if (!t->stop && t->tc.max_steps > 0 && t->global_step >= t->tc.max_steps) {
				t->stop = 1;
				t->stop_reason = WEFT_STOP_MAX_STEPS;
			}
			if (!t->stop && time_is_up(t)) {
				t->stop = 1;
				t->stop_reason = WEFT_STOP_MAX_TIME;
			}
			/* at an epoch's end the save waits for that epoch's
			 * validation below, so that its score is this step's */
			if (!epoch_done && step_ckpt_due(t)) {
				st = weft_trainer_save_checkpoint(t, "step");
				if (st)
					goto out;
			}
		}
		if (!epoch_done) { /* stopped inside the epoch: its final state stays shown */
			show_progress_end(t);
		} else {
			st = weft_trainer_callbacks_call(t, WEFT_CALLBACK_HOOK(on_train_epoch_end),
							 NULL);
			if (st)
				goto out;
			t->epoch++;
			t->next_batch = 0;
			if (t->tc.check_val_every_n_epoch > 0 &&
			    t->epoch % t->tc.check_val_every_n_epoch == 0) {
				st = run_validation(t);
				if (st)
					goto out;
			}
			show_progress_end(t);
			if (step_ckpt_due(t) ||
			    (t->tc.ckpt.enabled && t->tc.ckpt.every_n_epochs > 0 &&
			     t->epoch % t->tc.ckpt.every_n_epochs == 0)) {
				st = weft_trainer_save_checkpoint(t, "epoch");
				if (st)
					goto out;
			}
		}
	}
	/* the steps since the last read: checked, and the last one's loss
	 * for the "last" checkpoint and the summary */
	st = weft_trainer_loss_flush(t, t->global_step, 1);
	if (st)
		goto out;
	if (t->stop && t->stop_reason == WEFT_STOP_NONE)
		t->stop_reason = WEFT_STOP_CALLBACK;
	if (!t->stop && t->tc.max_epochs >= 0 && t->epoch >= t->tc.max_epochs)
		t->stop_reason = WEFT_STOP_MAX_EPOCHS;
	if (t->tc.ckpt.enabled && t->tc.ckpt.save_last)
		st = weft_trainer_save_checkpoint(t, "last");
	if (!st)
		print_stop_reason(t);
out:
	held_free(held, WEFT_TRAINER_MAX_MICRO);
	return st;
}

/* The memory peaks for summary.json, for each of the three counter sets
 * (WHERE_ALL: host and device together, WHERE_HOST, WHERE_DEVICE): each
 * category's (and the total's) largest peak over the ranks into mem[w],
 * and the rank that reached it (the lowest on a tie) into rank[w][]; the
 * same for the steady peaks (those since the end of the second step,
 * trainer_impl.h) into steady[w] and steady_rank[w][] (meaningful when
 * t->steady_steps > 0). Collective. */
enum { WHERE_ALL, WHERE_HOST, WHERE_DEVICE, WHERE_N };
enum { PEAK_N = WEFT_MEM_NUM_CATEGORIES + 1 };

/* a set's row of PEAK_N numbers: the peaks per category, then the total's */
static void peak_row(const weft_mem_stats *m, int64_t *row)
{
	for (int c = 0; c < WEFT_MEM_NUM_CATEGORIES; c++)
		row[c] = m->peak[c];
	row[WEFT_MEM_NUM_CATEGORIES] = m->peak_total;
}

static void set_peak(weft_mem_stats *m, int c, int64_t v)
{
	if (c < WEFT_MEM_NUM_CATEGORIES)
		m->peak[c] = v;
	else
		m->peak_total = v;
}

static weft_status peaks_over_ranks(weft_trainer *t, weft_mem_stats mem[WHERE_N],
				    int64_t rank[WHERE_N][PEAK_N],
				    weft_mem_stats steady[WHERE_N],
				    int64_t steady_rank[WHERE_N][PEAK_N])
{
	enum { ROW = 2 * WHERE_N * PEAK_N };
	const weft_mem_stats *first[WHERE_N] = { &t->first_peaks, &t->first_host_peaks,
						 &t->first_device_peaks };
	int64_t mine[ROW], *all;
	weft_status st;

	weft_mem_get_stats(&steady[WHERE_ALL]);
	weft_mem_get_split_stats(&steady[WHERE_HOST], &steady[WHERE_DEVICE]);
	for (int w = 0; w < WHERE_N; w++) {
		mem[w] = steady[w];
		if (t->steps_here >= 2) {
			/* the whole run's peak: the larger of the first
			 * steps' and the steady one */
			for (int c = 0; c < WEFT_MEM_NUM_CATEGORIES; c++)
				if (first[w]->peak[c] > mem[w].peak[c])
					mem[w].peak[c] = first[w]->peak[c];
			if (first[w]->peak_total > mem[w].peak_total)
				mem[w].peak_total = first[w]->peak_total;
		}
		peak_row(&mem[w], mine + (2 * w) * PEAK_N);
		peak_row(&steady[w], mine + (2 * w + 1) * PEAK_N);
	}
	all = calloc((size_t)t->world * ROW, sizeof(*all));
	if (!all)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory gathering the memory peaks");
	st = weft_trainer_all_gather_i64(t, mine, ROW, all);
	for (int i = 0; !st && i < ROW; i++) {
		int64_t best = all[i], who = 0;
		int w = i / (2 * PEAK_N), is_steady = (i / PEAK_N) % 2, c = i % PEAK_N;

		for (int r = 1; r < t->world; r++) {
			if (all[(size_t)r * ROW + i] > best) {
				best = all[(size_t)r * ROW + i];
				who = r;
			}
		}
		if (is_steady) {
			steady_rank[w][c] = who;
			set_peak(&steady[w], c, best);
		} else {
			rank[w][c] = who;
			set_peak(&mem[w], c, best);
		}
	}
	free(all);
	return st;
}

weft_status weft_trainer_write_summary(weft_trainer *t)
{
	weft_metric fin[4], tm[4], tot[10];
	size_t nf = 0, nt = 0, ntot = 0;
	weft_mem_stats mem[WHERE_N];
	weft_run_summary s;
	char path[WEFT_TRAINER_PATH + 32];
	double wall = weft_trainer_now() - t->t_start;
	int lm = weft_model_get_class(t->model) == WEFT_MODEL_GPT;
	double steps = t->global_step > 0 ? (double)t->global_step : 1.0;
	weft_metric pipe[4];
	size_t npipe = 0;
	int64_t peak_rank[WHERE_N][PEAK_N], planned[WEFT_MEM_NUM_CATEGORIES];
	int64_t steady_rank[WHERE_N][PEAK_N];
	weft_mem_stats steady[WHERE_N];
	int steady_ok;
	weft_status st;

	/* collective: every rank, before rank 0 alone writes */
	st = weft_trainer_pipeline_summary(t, pipe, &npipe);
	if (st)
		return st;
	st = peaks_over_ranks(t, mem, peak_rank, steady, steady_rank);
	if (st)
		return st;
	if (t->rank != 0)
		return WEFT_OK;
	weft_trainer_planned_bytes(t, planned);
	/* the plan predicts the steady peaks: the first steps' arena growth
	 * is not compared (a run of two steps or fewer has none to compare
	 * activations with) */
	steady_ok = t->steady_steps > 0;
	if (steady_ok) {
		weft_trainer_plan_check(planned, &steady[WHERE_ALL], steady_rank[WHERE_ALL]);
	} else {
		int64_t resident[WEFT_MEM_NUM_CATEGORIES];

		memcpy(resident, planned, sizeof(resident));
		resident[WEFT_MEM_ACTIVATIONS] = -1;
		weft_trainer_plan_check(resident, &mem[WHERE_ALL], peak_rank[WHERE_ALL]);
	}
	fin[nf++] = (weft_metric){ "train_loss", t->last_train_loss };
	if (t->have_val) {
		fin[nf++] = (weft_metric){ "val_loss", t->last_val_loss };
		if (!isnan(t->last_val_acc))
			fin[nf++] = (weft_metric){ "val_acc", t->last_val_acc };
	}
	tm[nt++] = (weft_metric){ "step", t->train_seconds / steps };
	tm[nt++] = (weft_metric){ "compute", (double)t->compute_ns * 1e-9 / steps };
	tm[nt++] = (weft_metric){ "comm", (double)t->comm_ns * 1e-9 / steps };
	tm[nt++] = (weft_metric){ "exposed_comm", (double)t->exposed_ns * 1e-9 / steps };
	tot[ntot++] = (weft_metric){ "train_seconds", t->train_seconds };
	tot[ntot++] = (weft_metric){ "compute_seconds", (double)t->compute_ns * 1e-9 };
	tot[ntot++] = (weft_metric){ "comm_seconds", (double)t->comm_ns * 1e-9 };
	tot[ntot++] = (weft_metric){ "exposed_comm_seconds", (double)t->exposed_ns * 1e-9 };
	tot[ntot++] = (weft_metric){ "comm_bytes", (double)t->comm_bytes };
	tot[ntot++] = (weft_metric){ "data_wait_seconds", t->data_wait_s };
	tot[ntot++] = (weft_metric){ lm ? "tokens" : "samples",
				     lm ? (double)t->tokens_seen : (double)t->samples_seen };
	if (t->tc.loss_scale.enabled) {
		tot[ntot++] = (weft_metric){ "skipped_steps", (double)t->scaler.skipped };
		tot[ntot++] = (weft_metric){ "loss_scale", t->scaler.scale };
	}
	s = (weft_run_summary){
		.strategy = t->tc.strategy_name,
		.comm = t->world > 1 ? t->tc.comm_name : "none",
		.world_size = t->world,
		.steps = t->global_step,
		.epochs = t->epoch,
		.wall_seconds = wall,
		.final_metrics = fin,
		.n_final_metrics = nf,
		.throughput = (lm ? (double)t->tokens_seen : (double)t->samples_seen) /
			      (t->train_seconds > 0 ? t->train_seconds : 1.0),
		.throughput_unit = lm ? "tokens/s" : "samples/s",
		.step_time = tm,
		.n_step_time = nt,
		.memory = &mem[WHERE_ALL],
		.totals = tot,
		.n_totals = ntot,
		.pipeline = pipe,
		.n_pipeline = npipe,
		.memory_rank = peak_rank[WHERE_ALL],
		.steady_memory = steady_ok ? &steady[WHERE_ALL] : NULL,
		.steady_memory_rank = steady_rank[WHERE_ALL],
		.host_memory = &mem[WHERE_HOST],
		.host_memory_rank = peak_rank[WHERE_HOST],
		.device_memory = &mem[WHERE_DEVICE],
		.device_memory_rank = peak_rank[WHERE_DEVICE],
		.steady_host_memory = steady_ok ? &steady[WHERE_HOST] : NULL,
		.steady_host_memory_rank = steady_rank[WHERE_HOST],
		.steady_device_memory = steady_ok ? &steady[WHERE_DEVICE] : NULL,
		.steady_device_memory_rank = steady_rank[WHERE_DEVICE],
		.plan_bytes = planned,
	};
	snprintf(path, sizeof(path), "%s/summary.json", t->run_dir);
	return weft_run_summary_write(path, &s);
}
