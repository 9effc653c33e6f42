/* Parsing of the `trainer:` section (Lightning's Trainer arguments). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_impl.h"
#include "train/trainer_config.h"
#include "weft/autograd.h"

static weft_status count_or_frac(const weft_cfg *sec, const char *key, double def,
				 weft_count_or_frac *out)
{
	const weft_cfg *n = weft_cfg_get(sec, key);
	const char *text;
	int64_t iv;
	double fv;

	out->is_count = 0;
	out->frac = def;
	out->count = 0;
	if (!n || weft_cfg_kind_of(n) == WEFT_CFG_NULL)
		return WEFT_OK;
	text = weft_cfg_scalar(n);
	if (text && !strpbrk(text, ".eE") && weft_cfg_as_int(n, &iv) == WEFT_OK) {
		if (iv < 0)
			return weft_cfg_error(n, "must be a number of batches >= 0 or a fraction "
					      "in [0.0, 1.0], got %lld", (long long)iv);
		out->is_count = 1;
		out->count = iv;
		return WEFT_OK;
	}
	if (weft_cfg_as_float(n, &fv) != WEFT_OK)
		return weft_cfg_error(n, "must be a number of batches (an integer) or a "
				      "fraction of the epoch (a float in [0.0, 1.0])");
	if (!(fv >= 0.0 && fv <= 1.0))
		return weft_cfg_error(n, "as a fraction must lie in [0.0, 1.0], got %g; give "
				      "an integer for a number of batches", fv);
	out->frac = fv;
	return WEFT_OK;
}

/* "DD:HH:MM:SS" (Lightning's string form) or a number of seconds. */
static weft_status parse_max_time(const weft_cfg *sec, double *out)
{
	const weft_cfg *n = weft_cfg_get(sec, "max_time");
	const char *text;
	double secs;

	*out = 0.0;
	if (!n || weft_cfg_kind_of(n) == WEFT_CFG_NULL)
		return WEFT_OK;
	text = weft_cfg_scalar(n);
	if (text && strchr(text, ':')) {
		long part[4] = { 0, 0, 0, 0 };
		int got = sscanf(text, "%ld:%ld:%ld:%ld", &part[0], &part[1], &part[2], &part[3]);

		if (got != 4 || part[0] < 0 || part[1] < 0 || part[2] < 0 || part[3] < 0)
			return weft_cfg_error(n, "must be \"DD:HH:MM:SS\" or seconds, got '%s'", text);
		*out = (double)part[0] * 86400 + (double)part[1] * 3600 + (double)part[2] * 60 +
		       (double)part[3];
		return WEFT_OK;
	}
	if (weft_cfg_as_float(n, &secs) != WEFT_OK || !(secs > 0) || !isfinite(secs))
		return weft_cfg_error(n, "must be \"DD:HH:MM:SS\" or a positive number of seconds");
	*out = secs;
	return WEFT_OK;
}

static weft_status name_of(const weft_cfg *n, const char *what, const char **out)
{
	*out = NULL;
	if (!n || weft_cfg_kind_of(n) == WEFT_CFG_NULL)
		return WEFT_OK;
	if (weft_cfg_kind_of(n) == WEFT_CFG_SCALAR)
		return weft_cfg_as_str(n, out);
	if (weft_cfg_kind_of(n) == WEFT_CFG_MAP) {
		const weft_cfg *name = weft_cfg_get(n, "name");

		if (!name)
			return weft_cfg_error(n, "as a mapping needs 'name:' (the %s plugin's name)",
					      what);
		return weft_cfg_as_str(name, out);
	}
	return weft_cfg_error(n, "must be a %s name or a mapping with 'name:'", what);
}

static weft_status parse_mode(const weft_cfg *sec, int *mode_max)
{
	static const char *const modes[] = { "min", "max", NULL };
	int idx = 0;
	weft_status st = weft_cfg_choice(sec, "mode", modes, NULL, &idx);

	if (st)
		return st;
	*mode_max = idx == 1;
	return WEFT_OK;
}

static weft_status default_mode(const weft_cfg *sec, const char *monitor, int *mode_max)
{
	*mode_max = monitor && strstr(monitor, "acc") != NULL;
	if (weft_cfg_get(sec, "mode"))
		return parse_mode(sec, mode_max);
	return WEFT_OK;
}

/* trainer.fast_dev_run: false (0), true (1) or a number of batches >= 1. */
static weft_status parse_fast_dev_run(const weft_cfg *tr, int64_t *out)
{
	const weft_cfg *n = weft_cfg_get(tr, "fast_dev_run");
	int on = 0;

	*out = 0;
	if (!n || weft_cfg_kind_of(n) == WEFT_CFG_NULL)
		return WEFT_OK;
	if (weft_cfg_as_bool(n, &on) == WEFT_OK) {
		*out = on;
		return WEFT_OK;
	}
	if (weft_cfg_as_int(n, out) != WEFT_OK || *out < 0)
		return weft_cfg_error(n, "must be true, false or a number of batches >= 1");
	return WEFT_OK;
}

/* fast_dev_run N, as Lightning: N training batches in one epoch, N
 * validation batches after them, no sanity check, no checkpoints, no
 * loggers. */
static void apply_fast_dev_run(weft_trainer_config *c)
{
	if (c->fast_dev_run <= 0)
		return;
	c->max_steps = c->fast_dev_run;
	c->max_epochs = 1;
	c->max_time_s = 0;
	c->limit_train_batches = (weft_count_or_frac){ .is_count = 1,
						       .count = c->fast_dev_run * c->accumulate };
	c->limit_val_batches = (weft_count_or_frac){ .is_count = 1, .count = c->fast_dev_run };
	c->val_check_interval = (weft_count_or_frac){ .frac = 1.0 };
	c->check_val_every_n_epoch = 1;
	c->num_sanity_val_steps = 0;
	c->ckpt.enabled = 0;
	c->log_csv = c->log_tb = 0;
}

/* trainer.logger: csv | tensorboard | a list of them | true (both, the
 * default) | false (none). */
static weft_status parse_logger(const weft_cfg *tr, weft_trainer_config *c)
{
	static const char *const names[] = { "csv", "tensorboard", NULL };
	const weft_cfg *n = weft_cfg_get(tr, "logger");
	size_t count;
	int on;

	c->log_csv = c->log_tb = 1;
	if (!n)
		return WEFT_OK;
	if (weft_cfg_kind_of(n) == WEFT_CFG_SCALAR && weft_cfg_as_bool(n, &on) == WEFT_OK) {
		c->log_csv = c->log_tb = on;
		return WEFT_OK;
	}
	c->log_csv = c->log_tb = 0;
	count = weft_cfg_kind_of(n) == WEFT_CFG_SEQ ? weft_cfg_size(n) : 1;
	if (weft_cfg_kind_of(n) != WEFT_CFG_SEQ && weft_cfg_kind_of(n) != WEFT_CFG_SCALAR)
		return weft_cfg_error(n, "must be csv, tensorboard, a list of them, true or false");
	for (size_t i = 0; i < count; i++) {
		const weft_cfg *e = weft_cfg_kind_of(n) == WEFT_CFG_SEQ ? weft_cfg_at(n, i) : n;
		const char *text = weft_cfg_scalar(e);

		if (text && !strcmp(text, names[0]))
			c->log_csv = 1;
		else if (text && !strcmp(text, names[1]))
			c->log_tb = 1;
		else
			return weft_cfg_error(e, "is not a logger: give csv, tensorboard, a list "
					      "of them, true (both) or false (none)");
	}
	return WEFT_OK;
}

/* Lightning's list form, callbacks: [{class: ModelCheckpoint, ...}, ...]:
 * each built-in class's mapping into *mc, *es, *lrm. */
static weft_status callbacks_list(const weft_cfg *cbs, const weft_cfg **mc, const weft_cfg **es,
				  const weft_cfg **lrm, const weft_cfg **tpm)
{
	for (size_t i = 0; i < weft_cfg_size(cbs); i++) {
		const weft_cfg *e = weft_cfg_at(cbs, i);
		const char *cls = NULL;
		const weft_cfg **slot;
		weft_status st;

		if (weft_cfg_kind_of(e) != WEFT_CFG_MAP || !weft_cfg_get(e, "class"))
			return weft_cfg_error(e, "must be a mapping with 'class:' (ModelCheckpoint, "
					      "EarlyStopping, LearningRateMonitor or ThroughputMonitor)");
		if ((st = weft_cfg_str(e, "class", NULL, &cls)))
			return st;
		slot = !strcmp(cls, "ModelCheckpoint") ? mc : !strcmp(cls, "EarlyStopping") ? es :
		       !strcmp(cls, "LearningRateMonitor") ? lrm :
		       !strcmp(cls, "ThroughputMonitor") ? tpm : NULL;
		if (!slot)
			return weft_cfg_error(weft_cfg_get(e, "class"),
					      "'%s' is not a built-in callback class (ModelCheckpoint, "
					      "EarlyStopping, LearningRateMonitor, ThroughputMonitor); "
					      "callback plugins go in the mapping form, "
					      "trainer.callbacks.<name>", cls);
		if (*slot)
			return weft_cfg_error(e, "names %s a second time", cls);
		*slot = e;
	}
	return WEFT_OK;
}

/* trainer.peak_flops: one device's peak FLOP/s, the denominator of MFU;
 * absent or null: the default (derived on the CPU, unknown on a GPU). */
static weft_status parse_peak_flops(const weft_cfg *tr, double *out)
{
	const weft_cfg *n = weft_cfg_get(tr, "peak_flops");
	weft_status st;

	*out = 0.0;
	if (!n || weft_cfg_kind_of(n) == WEFT_CFG_NULL)
		return WEFT_OK;
	st = weft_cfg_float(tr, "peak_flops", 0.0, out);
	if (st)
		return st;
	if (!(*out > 0) || !isfinite(*out))
		return weft_cfg_error(n, "must be the peak FLOP/s of one device, a number > 0 (such "
				      "as 989.0e12, an H100 SXM's dense bf16 peak), or null for the "
				      "default; got %g", *out);
	return WEFT_OK;
}

static weft_status parse_callbacks(const weft_cfg *tr, weft_trainer_config *c)
{
	const weft_cfg *cbs = weft_cfg_get(tr, "callbacks");
	const weft_cfg *mc = NULL, *es = NULL, *lrm = NULL, *tpm = NULL;
	weft_status st;

	if (cbs && weft_cfg_kind_of(cbs) == WEFT_CFG_SEQ) {
		if ((st = callbacks_list(cbs, &mc, &es, &lrm, &tpm)))
			return st;
	} else if (cbs && weft_cfg_kind_of(cbs) != WEFT_CFG_MAP &&
		   weft_cfg_kind_of(cbs) != WEFT_CFG_NULL) {
		return weft_cfg_error(cbs, "must be a mapping (model_checkpoint:, early_stopping:, "
				      "learning_rate_monitor:, throughput_monitor:) or a list of "
				      "{class: ...}");
	} else {
		mc = weft_cfg_get(cbs, "model_checkpoint");
		es = weft_cfg_get(cbs, "early_stopping");
		lrm = weft_cfg_get(cbs, "learning_rate_monitor");
		tpm = weft_cfg_get(cbs, "throughput_monitor");
	}
	c->lr_monitor.enabled = lrm != NULL;
	/* ThroughputMonitor has no options here: its class key alone, or an
	 * empty mapping (or null) in the mapping form */
	c->throughput_monitor = tpm != NULL;
	if (tpm && weft_cfg_kind_of(tpm) == WEFT_CFG_MAP &&
	    weft_cfg_size(tpm) > (weft_cfg_get(tpm, "class") ? 1u : 0u))
		return weft_cfg_error(tpm, "takes no options (tokens/s and MFU are logged at every "
				      "logged step; trainer.peak_flops sets the peak)");
	{
		static const char *const intervals[] = { "step", "epoch", NULL };
		int idx = 0;

		if ((st = weft_cfg_choice(lrm, "logging_interval", intervals, "step", &idx)))
			return st;
		c->lr_monitor.per_epoch = idx == 1;
	}
	if ((st = weft_cfg_int(mc, "every_n_train_steps", 0, &c->ckpt.every_n_train_steps)) ||
	    (st = weft_cfg_int(mc, "every_n_epochs", 1, &c->ckpt.every_n_epochs)) ||
	    (st = weft_cfg_int(mc, "save_top_k", 1, &c->ckpt.save_top_k)) ||
	    (st = weft_cfg_str(mc, "monitor", NULL, &c->ckpt.monitor)) ||
	    (st = weft_cfg_bool(mc, "save_last", 1, &c->ckpt.save_last)) ||
	    (st = default_mode(mc, c->ckpt.monitor, &c->ckpt.mode_max)))
		return st;
	if (c->ckpt.every_n_train_steps < 0)
		return weft_cfg_error(weft_cfg_get(mc, "every_n_train_steps"), "must be >= 0");
	if (c->ckpt.every_n_epochs < 0)
		return weft_cfg_error(weft_cfg_get(mc, "every_n_epochs"), "must be >= 0");
	if (c->ckpt.save_top_k < -1)
		return weft_cfg_error(weft_cfg_get(mc, "save_top_k"),
				      "must be -1 (keep all), 0 (none) or a count, got %lld",
				      (long long)c->ckpt.save_top_k);
	c->early.enabled = es != NULL;
	if ((st = weft_cfg_str(es, "monitor", "val_loss", &c->early.monitor)) ||
	    (st = weft_cfg_int(es, "patience", 3, &c->early.patience)) ||
	    (st = weft_cfg_float(es, "min_delta", 0.0, &c->early.min_delta)) ||
	    (st = default_mode(es, c->early.monitor, &c->early.mode_max)))
		return st;
	if (c->early.patience < 0)
		return weft_cfg_error(weft_cfg_get(es, "patience"), "must be >= 0");
	return WEFT_OK;
}

weft_status weft_trainer_config_parse(const weft_cfg *root, const char *default_name,
				      weft_trainer_config *c)
{
	static const char *const accels[] = { "cpu", "cuda", "auto", NULL };
	static const char *const precisions[] = { "32-true", "32", "bf16-mixed", "16-mixed", NULL };
	static const char *const act_ckpt_modes[] = { "none", "full", "selective", NULL };
	const weft_cfg *tr = weft_cfg_get(root, "trainer");
	int64_t seed = 0, timeout_s = 0;
	int accel = 0, prec = 0;
	weft_status st;

	memset(c, 0, sizeof(*c));
	c->section = tr;
	if (tr && weft_cfg_kind_of(tr) != WEFT_CFG_MAP)
		return weft_cfg_error(tr, "must be a mapping of Trainer options");
	if ((st = weft_cfg_int(root, "seed_everything", 0, &seed)))
		return st;
	if (seed < 0)
		return weft_cfg_error(weft_cfg_get(root, "seed_everything"), "must be >= 0");
	c->seed = (uint64_t)seed;
	if ((st = weft_cfg_choice(tr, "accelerator", accels, "cpu", &accel)))
		return st;
	c->accelerator = accel == 1 ? "cuda" : "cpu";
	c->device = WEFT_CPU;
	if (accel == 1)
		c->device.type = WEFT_DEVICE_CUDA;
	/* devices: auto takes the world from the launcher that started the
	 * ranks (weft_trainer_config_resolve_devices); alone it is 1 */
	{
		const weft_cfg *dev = weft_cfg_get(tr, "devices");

		c->devices_auto = dev && weft_cfg_scalar(dev) &&
				  !strcmp(weft_cfg_scalar(dev), "auto");
	}
	if (c->devices_auto)
		c->devices = 1;
	else if ((st = weft_cfg_int(tr, "devices", 1, &c->devices)))
		return st;
	if ((st = weft_cfg_int(tr, "num_nodes", 1, &c->num_nodes)))
		return st;
	if (c->devices < 1 || c->devices > 1024)
		return weft_cfg_error(weft_cfg_get(tr, "devices"),
				      "must be a number of processes per node in 1..1024, got %lld",
				      (long long)c->devices);
	if (c->num_nodes < 1)
		return weft_cfg_error(weft_cfg_get(tr, "num_nodes"), "must be >= 1, got %lld",
				      (long long)c->num_nodes);
	c->strategy = weft_cfg_get(tr, "strategy");
	if ((st = name_of(c->strategy, "strategy", &c->strategy_name)))
		return st;
	if (!c->strategy_name || !strcmp(c->strategy_name, "auto")) {
		c->strategy_auto = 1;
		c->strategy_name = c->devices * c->num_nodes > 1 ? "ddp" : "single";
	}
	c->comm = weft_cfg_get(tr, "comm");
	if ((st = name_of(c->comm, "comm backend", &c->comm_name)))
		return st;
	if (c->comm && weft_cfg_kind_of(c->comm) == WEFT_CFG_MAP)
		c->comm_options = c->comm;
	if (!c->comm_name || !strcmp(c->comm_name, "auto"))
		c->comm_name = accel == 1 ? "nccl" : "gloo";
	if ((st = weft_cfg_int(tr, "comm_timeout", 1800, &timeout_s)))
		return st;
	if (timeout_s < 1)
		return weft_cfg_error(weft_cfg_get(tr, "comm_timeout"),
				      "must be a number of seconds >= 1, got %lld", (long long)timeout_s);
	c->comm_timeout_ms = timeout_s * 1000;
	if ((st = weft_cfg_choice(tr, "precision", precisions, "32-true", &prec)))
		return st;
	/* the order of nn/act_ckpt.h's weft_act_ckpt */
	if ((st = weft_cfg_choice(tr, "activation_checkpointing", act_ckpt_modes, "none",
				  &c->act_ckpt)))
		return st;
	c->precision = prec <= 1 ? "32-true" : precisions[prec];
	if ((st = weft_precision_parse(tr, c->precision, &c->autocast, &c->loss_scale)) ||
	    (st = weft_lowp_act_parse(tr, c->autocast, &c->lowp_act)))
		return st;
	/* tensor parallelism's ops (core/tp) move and reduce F32 activations */
	if (!strcmp(c->strategy_name, "tp") && c->lowp_act == WEFT_LOWP_ACT_ON)
		return weft_cfg_error(weft_cfg_get(tr, "lowp_activations"), "is true, but strategy "
				      "tp keeps its activations in float32 (its split, gather and "
				      "vocabulary-parallel ops take F32); set lowp_activations: "
				      "auto (F32 activations under tp) or false");
	if (!strcmp(c->strategy_name, "tp"))
		c->lowp_act = WEFT_LOWP_ACT_OFF;
	if ((st = weft_cfg_bool(tr, "weight_copy", 1, &c->weight_copy)))
		return st;
	if ((st = weft_cfg_int(tr, "max_epochs", -1, &c->max_epochs)) ||
	    (st = weft_cfg_int(tr, "max_steps", -1, &c->max_steps)) ||
	    (st = parse_max_time(tr, &c->max_time_s)) ||
	    (st = weft_cfg_int(tr, "accumulate_grad_batches", 1, &c->accumulate)) ||
	    (st = weft_cfg_float(tr, "gradient_clip_val", 0.0, &c->gradient_clip_val)) ||
	    (st = count_or_frac(tr, "val_check_interval", 1.0, &c->val_check_interval)) ||
	    (st = weft_cfg_int(tr, "check_val_every_n_epoch", 1, &c->check_val_every_n_epoch)) ||
	    (st = count_or_frac(tr, "limit_train_batches", 1.0, &c->limit_train_batches)) ||
	    (st = count_or_frac(tr, "limit_val_batches", 1.0, &c->limit_val_batches)) ||
	    (st = weft_cfg_int(tr, "log_every_n_steps", 50, &c->log_every_n_steps)) ||
	    (st = weft_cfg_bool(tr, "enable_progress_bar", 1, &c->enable_progress_bar)) ||
	    (st = weft_cfg_bool(tr, "enable_checkpointing", 1, &c->ckpt.enabled)) ||
	    (st = weft_cfg_str(tr, "default_root_dir", "runs", &c->default_root_dir)) ||
	    (st = weft_cfg_str(tr, "name", default_name, &c->name)) ||
	    (st = weft_cfg_str(tr, "resume", NULL, &c->resume)) ||
	    (st = weft_cfg_int(tr, "threads", 0, &c->threads)) ||
	    (st = parse_peak_flops(tr, &c->peak_flops)))
		return st;
	/* Lightning's output switches: the model summary and the loggers */
	if ((st = weft_cfg_bool(tr, "enable_model_summary", 1, &c->enable_model_summary)) ||
	    (st = parse_logger(tr, c)) ||
	    (st = weft_cfg_int(tr, "num_sanity_val_steps", 2, &c->num_sanity_val_steps)) ||
	    (st = parse_fast_dev_run(tr, &c->fast_dev_run)))
		return st;
	if (c->num_sanity_val_steps < -1)
		return weft_cfg_error(weft_cfg_get(tr, "num_sanity_val_steps"),
				      "must be a number of batches >= 0, or -1 for all");
	/* Lightning: with neither bound, max_epochs is 1000. */
	if (c->max_epochs < 0 && c->max_steps < 0 && c->max_time_s == 0)
		c->max_epochs = 1000;
	if (c->max_epochs == 0 || c->max_epochs < -1)
		return weft_cfg_error(weft_cfg_get(tr, "max_epochs"), "must be >= 1 (or -1: no "
				      "limit), got %lld", (long long)c->max_epochs);
	if (c->max_steps == 0 || c->max_steps < -1)
		return weft_cfg_error(weft_cfg_get(tr, "max_steps"), "must be >= 1 (or -1: no "
				      "limit), got %lld", (long long)c->max_steps);
	if (c->accumulate < 1)
		return weft_cfg_error(weft_cfg_get(tr, "accumulate_grad_batches"),
				      "must be >= 1, got %lld", (long long)c->accumulate);
	if (!(c->gradient_clip_val >= 0) || !isfinite(c->gradient_clip_val))
		return weft_cfg_error(weft_cfg_get(tr, "gradient_clip_val"),
				      "must be >= 0 (0 turns clipping off), got %g",
				      c->gradient_clip_val);
	/* Lightning: check_val_every_n_epoch: null validates every
	 * val_check_interval batches counted across epochs, never at an
	 * epoch's end (0 here). */
	{
		const weft_cfg *cv = weft_cfg_get(tr, "check_val_every_n_epoch");

		if (cv && weft_cfg_kind_of(cv) == WEFT_CFG_NULL) {
			c->check_val_every_n_epoch = 0;
			if (!c->val_check_interval.is_count)
				return weft_cfg_error(weft_cfg_get(tr, "val_check_interval"),
						      "must be a number of batches (an integer) "
						      "when check_val_every_n_epoch is null");
		} else if (c->check_val_every_n_epoch < 1) {
			return weft_cfg_error(cv, "must be >= 1, or null to validate every "
					      "val_check_interval batches across epochs");
		}
	}
	if (c->log_every_n_steps < 1)
		return weft_cfg_error(weft_cfg_get(tr, "log_every_n_steps"), "must be >= 1");
	if (c->threads < 0)
		return weft_cfg_error(weft_cfg_get(tr, "threads"),
				      "must be >= 0 (0: cores / local ranks)");
	if (c->val_check_interval.is_count && c->val_check_interval.count == 0)
		return weft_cfg_error(weft_cfg_get(tr, "val_check_interval"),
				      "must be >= 1 batch or a fraction > 0");
	if (!c->val_check_interval.is_count && c->val_check_interval.frac == 0)
		return weft_cfg_error(weft_cfg_get(tr, "val_check_interval"),
				      "must be >= 1 batch or a fraction > 0");
	st = parse_callbacks(tr, c);
	if (!st)
		st = weft_trainer_sample_parse(tr, &c->sample);
	if (!st)
		apply_fast_dev_run(c);
	return st;
}

weft_status weft_trainer_config_resolve_devices(weft_trainer_config *c, int world,
						int local_world)
{
	int64_t nodes;

	if (!c->devices_auto)
		return WEFT_OK;
	if (local_world < 1 || local_world > world)
		local_world = world;
	nodes = (world + local_world - 1) / local_world;
	if (weft_cfg_get(c->section, "num_nodes") && c->num_nodes != nodes)
		return weft_cfg_error(weft_cfg_get(c->section, "num_nodes"),
				      "is %lld but the launcher started %d ranks, %d per node (%lld "
				      "nodes); remove trainer.num_nodes with devices: auto, or make "
				      "them agree", (long long)c->num_nodes, world, local_world,
				      (long long)nodes);
	c->devices = local_world;
	c->num_nodes = nodes;
	if (c->strategy_auto)
		c->strategy_name = world > 1 ? "ddp" : "single";
	return WEFT_OK;
}
