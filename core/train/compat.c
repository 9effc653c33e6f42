/* Lightning's and DeepSpeed's spellings in weft's terms (compat.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/compat.h"
#include "weft/device.h"
#include "weft/log.h"

/* Whether this process says what it resolved: the process the user
 * started, or rank 0 of a launcher, but not the ranks of a weft fit that
 * relaunched itself after saying it (WEFT_COMPAT_SAID in their
 * environment, which the saying process sets). */
static int speaks(void)
{
	const char *r = getenv("WEFT_RANK") ? getenv("WEFT_RANK") : getenv("RANK");

	if (getenv("WEFT_COMPAT_SAID") || (r && strcmp(r, "0")))
		return 0;
	if (!r)
		setenv("WEFT_COMPAT_SAID", "1", 1);
	return 1;
}

static int under_launcher(void)
{
	return getenv("WEFT_WORLD_SIZE") || getenv("WORLD_SIZE");
}

static const weft_cfg *get2(const weft_cfg *root, const char *a, const char *b)
{
	return weft_cfg_get(weft_cfg_get(root, a), b);
}

static const char *text_of(const weft_cfg *n)
{
	return n && weft_cfg_kind_of(n) == WEFT_CFG_SCALAR ? weft_cfg_scalar(n) : NULL;
}

/* The CUDA devices this process sees (0 without a CUDA build or device). */
static int cuda_devices(void)
{
	const weft_kernel_table *k = NULL;
	weft_device d = WEFT_CPU;
	int32_t n = 0;

	d.type = WEFT_DEVICE_CUDA;
	if (weft_kernels_get(d, &k) != WEFT_OK || !k->device_count || k->device_count(&n)) {
		weft_error_clear();
		return 0;
	}
	return n > 0 ? n : 0;
}

/* ---- Lightning ------------------------------------------------------ */

struct strategy_alias {
	const char *alias, *name;
	int find_unused; /* 1: find_unused_parameters: true */
	const char *note; /* said once in an info line, or NULL */
};

static const struct strategy_alias strategy_aliases[] = {
	{ "deepspeed", "zero_2", 0, "Lightning's DeepSpeed default is ZeRO stage 2" },
	{ "deepspeed_stage_1", "zero_1", 0, NULL },
	{ "deepspeed_stage_2", "zero_2", 0, NULL },
	{ "deepspeed_stage_3", "zero_3", 0, NULL },
	{ "fsdp", "zero_3", 0, "parameters, gradients and optimizer state sharded over the ranks "
	  "as FSDP's FULL_SHARD" },
	{ "ddp_spawn", "ddp", 0, "weft's launcher starts the ranks as processes; nothing is "
	  "spawned from a notebook" },
	{ "ddp_fork", "ddp", 0, "weft's launcher starts the ranks as processes" },
	{ "ddp_notebook", "ddp", 0, "weft's launcher starts the ranks as processes" },
	{ "ddp_find_unused_parameters_true", "ddp", 1, NULL },
	{ "ddp_find_unused_parameters_false", "ddp", 0, NULL },
	{ "ddp_spawn_find_unused_parameters_true", "ddp", 1, "weft's launcher starts the ranks "
	  "as processes" },
	{ "ddp_spawn_find_unused_parameters_false", "ddp", 0, "weft's launcher starts the ranks "
	  "as processes" },
};

static weft_status lightning_strategy(weft_config *cfg, int say)
{
	const weft_cfg *tr = weft_cfg_get(weft_config_root(cfg), "trainer");
	const weft_cfg *sn = weft_cfg_get(tr, "strategy");
	int is_map = sn && weft_cfg_kind_of(sn) == WEFT_CFG_MAP;
	const weft_cfg *nn = is_map ? weft_cfg_get(sn, "name") : sn;
	const char *name = text_of(nn);
	const struct strategy_alias *a = NULL;
	weft_status st;

	if (!name)
		return WEFT_OK;
	/* Lightning's stage 2 offload is ZeRO-2 with the optimizer state on
	 * the host; the stage 3 forms also move parameters, which weft does not */
	if (!strcmp(name, "deepspeed_stage_2_offload")) {
		st = is_map ? weft_config_set(cfg, "trainer.strategy.name", "zero_2") :
			      weft_config_set(cfg, "trainer.strategy", "{name: zero_2}");
		if (!st)
			st = weft_config_set(cfg, "trainer.strategy.offload_optimizer",
					     "{device: cpu}");
		if (!st && say)
			weft_log(WEFT_LOG_INFO, "trainer.strategy 'deepspeed_stage_2_offload' runs as "
				 "weft's {name: zero_2, offload_optimizer: {device: cpu}}");
		return st;
	}
	if (strstr(name, "_offload") && (!strncmp(name, "deepspeed", 9) || !strncmp(name, "fsdp", 4)))
		return weft_cfg_error(nn, "'%s' moves parameters to the host or NVMe, which weft "
				      "does not do: every rank keeps its parameter shard in its "
				      "device's memory; use '%.*s' without '_offload', with "
				      "offload_optimizer: {device: cpu} to move the optimizer state "
				      "to the host", name, (int)(strstr(name, "_offload") - name), name);
	for (size_t i = 0; i < sizeof(strategy_aliases) / sizeof(strategy_aliases[0]); i++)
		if (!strcmp(name, strategy_aliases[i].alias))
			a = &strategy_aliases[i];
	if (!a)
		return WEFT_OK;
	if (a->find_unused && !is_map)
		st = weft_config_set(cfg, "trainer.strategy",
				     "{name: ddp, find_unused_parameters: true}");
	else
		st = weft_config_set(cfg, is_map ? "trainer.strategy.name" : "trainer.strategy",
				     a->name);
	if (!st && a->find_unused && is_map) {
		const weft_cfg *fu = weft_cfg_get(sn, "find_unused_parameters");
		int on = 1;

		if (fu && !weft_cfg_as_bool(fu, &on) && !on)
			return weft_cfg_error(fu, "is false but the strategy name '%s' turns it on; "
					      "drop one of them", a->alias);
		st = weft_config_set(cfg, "trainer.strategy.find_unused_parameters", "true");
	}
	if (!st && a->note && say)
		weft_log(WEFT_LOG_INFO, "trainer.strategy '%s' runs as weft's '%s' (%s)", a->alias,
			 a->name, a->note);
	return st;
}

static weft_status lightning_precision(weft_config *cfg)
{
	const weft_cfg *n = get2(weft_config_root(cfg), "trainer", "precision");
	const char *p = text_of(n);

	if (!p)
		return WEFT_OK;
	if (!strcmp(p, "16"))
		return weft_config_set(cfg, "trainer.precision", "16-mixed");
	if (!strcmp(p, "bf16"))
		return weft_config_set(cfg, "trainer.precision", "bf16-mixed");
	if (!strcmp(p, "32"))
		return weft_config_set(cfg, "trainer.precision", "32-true");
	if (!strcmp(p, "bf16-true") || !strcmp(p, "16-true"))
		return weft_cfg_error(n, "'%s' would hold the parameters and optimizer state in "
				      "%s, and weft keeps them in float32; use precision: %s "
				      "(float32 parameters, %s matrix products)", p,
				      p[0] == 'b' ? "bf16" : "float16",
				      p[0] == 'b' ? "bf16-mixed" : "16-mixed",
				      p[0] == 'b' ? "bf16" : "float16");
	return WEFT_OK;
}

/* accelerator: gpu is cuda; auto is cuda when a CUDA device is usable.
 * *cuda says which it is now. */
static weft_status lightning_accelerator(weft_config *cfg, int *cuda)
{
	const weft_cfg *n = get2(weft_config_root(cfg), "trainer", "accelerator");
	const char *a = text_of(n);

	*cuda = a && (!strcmp(a, "cuda") || !strcmp(a, "gpu"));
	if (a && !strcmp(a, "gpu"))
		return weft_config_set(cfg, "trainer.accelerator", "cuda");
	if (a && !strcmp(a, "auto")) {
		*cuda = cuda_devices() > 0;
		return weft_config_set(cfg, "trainer.accelerator", *cuda ? "cuda" : "cpu");
	}
	return WEFT_OK;
}

/* devices: -1 is every visible GPU, as in Lightning, which refuses it on
 * the CPU; devices: auto with cuda outside a launcher is every GPU too. */
static weft_status lightning_devices(weft_config *cfg, int cuda)
{
	const weft_cfg *n = get2(weft_config_root(cfg), "trainer", "devices");
	const char *d = text_of(n);
	char num[32];
	int count;

	if (!d || (strcmp(d, "-1") && strcmp(d, "auto")))
		return WEFT_OK;
	if (!strcmp(d, "auto") && (!cuda || under_launcher()))
		return WEFT_OK;
	if (!cuda)
		return weft_cfg_error(n, "-1 means every visible GPU, and this run uses the CPU "
				      "(Lightning refuses devices: -1 on the CPU as well); give the "
				      "number of processes, like devices: 4");
	count = cuda_devices();
	if (count < 1)
		return weft_cfg_error(n, "is %s (every visible GPU) but this process sees no CUDA "
				      "device; check CUDA_VISIBLE_DEVICES or use accelerator: cpu", d);
	snprintf(num, sizeof(num), "%d", count);
	return weft_config_set(cfg, "trainer.devices", num);
}

/* ---- the optimizer's DeepSpeed shape --------------------------------- */

static const char *const builtin_optims[] = { "sgd", "adam", "adamw", "lion", NULL };

/* The built-in name `name` matches in any case, or NULL. */
static const char *builtin_optim(const char *name)
{
	for (int i = 0; builtin_optims[i]; i++)
		if (!strcasecmp(name, builtin_optims[i]))
			return builtin_optims[i];
	return NULL;
}

/* optimizer: {type: T, params: {...}} -> {name: t, ...params}. DeepSpeed's
 * Adam is AdamW unless params.adam_w_mode is false, and its Adam and AdamW
 * default to weight_decay 0 (weft's adamw: 0.01), so that default is
 * written out. `sec` is the YAML's optimizer section or the DeepSpeed
 * document's optimizer node. */
static weft_status optimizer_shape(weft_config *cfg, const weft_cfg *sec)
{
	const weft_cfg *type = weft_cfg_get(sec, "type");
	const weft_cfg *params = weft_cfg_get(sec, "params");
	const weft_cfg *awm = weft_cfg_get(params, "adam_w_mode");
	const char *t = text_of(type), *name;
	char path[300];
	int adamw_mode = 1;
	weft_status st;

	if (!type)
		return WEFT_OK;
	if (!t)
		return weft_cfg_error(type, "must be an optimizer name like AdamW");
	if (weft_cfg_get(sec, "name"))
		return weft_cfg_error(type, "and 'name' both name the optimizer; keep one");
	if (params && weft_cfg_kind_of(params) != WEFT_CFG_MAP &&
	    weft_cfg_kind_of(params) != WEFT_CFG_NULL)
		return weft_cfg_error(params, "must be a mapping like {lr: 0.0001, betas: [0.9, "
				      "0.999]}");
	if (awm && (st = weft_cfg_as_bool(awm, &adamw_mode)))
		return st;
	name = builtin_optim(t);
	if (name && !strcmp(name, "adam") && adamw_mode)
		name = "adamw";
	if (awm && (!name || strncmp(name, "adam", 4)))
		return weft_cfg_error(awm, "applies to DeepSpeed's Adam only");
	/* the old section stays valid (the document keeps replaced nodes) */
	if ((st = weft_config_set(cfg, "optimizer", "{}")) ||
	    (st = weft_config_set(cfg, "optimizer.name", name ? name : t)))
		return st;
	for (size_t i = 0; i < weft_cfg_size(sec); i++) {
		const char *k = weft_cfg_key_at(sec, i);

		if (!strcmp(k, "type") || !strcmp(k, "params"))
			continue;
		snprintf(path, sizeof(path), "optimizer.%s", k);
		if ((st = weft_config_graft(cfg, path, weft_cfg_at(sec, i))))
			return st;
	}
	for (size_t i = 0; params && i < weft_cfg_size(params); i++) {
		const char *k = weft_cfg_key_at(params, i);

		if (!strcmp(k, "adam_w_mode"))
			continue;
		snprintf(path, sizeof(path), "optimizer.%s", k);
		/* by the keys written, not weft_cfg_get: asking would make a
		 * misspelt key its own "did you mean" */
		for (size_t j = 0; j < weft_cfg_size(sec); j++)
			if (!strcmp(weft_cfg_key_at(sec, j), k))
				return weft_cfg_error(weft_cfg_at(params, i), "is given twice: here "
						      "and beside 'params'; keep one");
		if ((st = weft_config_graft(cfg, path, weft_cfg_at(params, i))))
			return st;
	}
	if (name && !strncmp(name, "adam", 4) && !weft_cfg_get(params, "weight_decay") &&
	    (st = weft_config_set(cfg, "optimizer.weight_decay", "0.0")))
		return st;
	return WEFT_OK;
}

static weft_status optimizer_yaml(weft_config *cfg)
{
	const weft_cfg *sec = weft_cfg_get(weft_config_root(cfg), "optimizer");
	const char *name, *b;

	if (!sec || weft_cfg_kind_of(sec) != WEFT_CFG_MAP)
		return WEFT_OK;
	if (weft_cfg_get(sec, "type"))
		return optimizer_shape(cfg, sec);
	name = text_of(weft_cfg_get(sec, "name"));
	b = name ? builtin_optim(name) : NULL;
	if (b && strcmp(b, name))
		return weft_config_set(cfg, "optimizer.name", b);
	return WEFT_OK;
}

/* ---- DeepSpeed ------------------------------------------------------ */

struct ds {
	weft_config *cfg;         /* the weft config being rewritten */
	const weft_cfg *root;     /* the DeepSpeed document's top level */
	char ignored[1024];       /* keys ignored, for the one warning */
};

/* Whether the YAML scalar `have` says the same as `want`. */
static int same_value(const weft_cfg *have, const char *want)
{
	const char *h = text_of(have);
	double a, b;
	char *end;

	if (!h)
		return 0;
	if (!strcmp(h, want))
		return 1;
	a = strtod(h, &end);
	if (*end || end == h)
		return 0;
	b = strtod(want, &end);
	return !*end && a == b;
}

/* Sets weft's `path` from the DeepSpeed node `from` (grafted when `value`
 * is NULL, else `value`); a different value already in the YAML is an
 * error naming both places. */
static weft_status put(struct ds *d, const char *path, const weft_cfg *from, const char *value)
{
	const weft_cfg *cur = weft_config_root(d->cfg);
	const char *v = value ? value : text_of(from);
	char seg[128], here[600], there[600];

	for (const char *p = path; cur;) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);

		snprintf(seg, sizeof(seg), "%.*s", (int)n, p);
		cur = weft_cfg_get(cur, seg);
		if (!dot)
			break;
		p = dot + 1;
	}
	if (cur && weft_cfg_kind_of(cur) != WEFT_CFG_NULL) {
		if (v && same_value(cur, v))
			return WEFT_OK;
		return weft_error_set(WEFT_ERR_CONFIG, "%s: the DeepSpeed config says %s (%s) and "
				      "the weft config says %s: %s (%s); remove one of them or make "
				      "them agree", weft_cfg_where(from, there, sizeof(there)),
				      v ? v : "a mapping", weft_cfg_path(from, seg, sizeof(seg)),
				      path, text_of(cur) ? text_of(cur) : "a mapping",
				      weft_cfg_where(cur, here, sizeof(here)));
	}
	return value ? weft_config_set(d->cfg, path, value) : weft_config_graft(d->cfg, path, from);
}

static void ignore(struct ds *d, const char *key)
{
	size_t n = strlen(d->ignored);

	snprintf(d->ignored + n, sizeof(d->ignored) - n, "%s%s", n ? ", " : "", key);
}

/* A block that DeepSpeed turns off with enabled: false. */
static int disabled(const weft_cfg *n)
{
	const weft_cfg *e = weft_cfg_kind_of(n) == WEFT_CFG_MAP ? weft_cfg_get(n, "enabled") : NULL;
	int on = 1;

	return e && !weft_cfg_as_bool(e, &on) && !on;
}

/* A block that DeepSpeed turns on with enabled: true (its default is off). */
static int enabled(const weft_cfg *n)
{
	const weft_cfg *e = weft_cfg_kind_of(n) == WEFT_CFG_MAP ? weft_cfg_get(n, "enabled") : NULL;
	int on = 0;

	return e && !weft_cfg_as_bool(e, &on) && on;
}

static weft_status ds_int(const weft_cfg *n, int64_t *out)
{
	weft_status st = weft_cfg_as_int(n, out);

	if (st)
		return st;
	if (*out < 1)
		return weft_cfg_error(n, "must be >= 1, got %lld", (long long)*out);
	return WEFT_OK;
}

/* The world the batch triple is checked against: devices x num_nodes, or
 * the launcher's world under devices: auto. */
static int64_t world_of(const weft_config *cfg)
{
	const weft_cfg *tr = weft_cfg_get(weft_config_root(cfg), "trainer");
	const weft_cfg *dn = weft_cfg_get(tr, "devices");
	int64_t dev = 1, nodes = 1;
	const char *w = getenv("WEFT_WORLD_SIZE") ? getenv("WEFT_WORLD_SIZE") : getenv("WORLD_SIZE");

	if (text_of(dn) && !strcmp(text_of(dn), "auto"))
		return w && atoll(w) > 0 ? atoll(w) : 1;
	if (dn && weft_cfg_as_int(dn, &dev))
		dev = 1;
	if (weft_cfg_get(tr, "num_nodes") && weft_cfg_int(tr, "num_nodes", 1, &nodes))
		nodes = 1;
	return dev * nodes;
}

/* train_batch_size = micro x accumulation x world, as DeepSpeed solves it. */
static weft_status ds_batch(struct ds *d, int64_t world)
{
	const weft_cfg *tb = weft_cfg_get(d->root, "train_batch_size");
	const weft_cfg *mb = weft_cfg_get(d->root, "train_micro_batch_size_per_gpu");
	const weft_cfg *ga = weft_cfg_get(d->root, "gradient_accumulation_steps");
	int64_t t = 0, m = 0, a = 0;
	char v[32];
	weft_status st;

	if ((tb && (st = ds_int(tb, &t))) || (mb && (st = ds_int(mb, &m))) ||
	    (ga && (st = ds_int(ga, &a))))
		return st;
	if (!tb && !mb) {
		if (ga)
			return put(d, "trainer.accumulate_grad_batches", ga, NULL);
		return WEFT_OK;
	}
	if (tb && mb && ga) {
		if (t != m * a * world)
			goto mismatch;
	} else if (tb && mb) {
		a = t / (m * world);
		if (a < 1 || t != m * a * world)
			goto mismatch;
	} else if (tb) {
		if (!ga)
			a = 1;
		m = t / (a * world);
		if (m < 1 || t != m * a * world)
			goto mismatch;
	} else {
		if (!ga)
			a = 1;
		t = m * a * world;
	}
	snprintf(v, sizeof(v), "%lld", (long long)m);
	if ((st = put(d, "data.batch_size", mb ? mb : tb, v)))
		return st;
	snprintf(v, sizeof(v), "%lld", (long long)a);
	return put(d, "trainer.accumulate_grad_batches", ga ? ga : tb, v);
mismatch: {
		char where[600];

		return weft_error_set(WEFT_ERR_CONFIG, "%s: train_batch_size %s, "
				      "train_micro_batch_size_per_gpu %s and "
				      "gradient_accumulation_steps %s do not fit a world of %lld "
				      "ranks: DeepSpeed needs train_batch_size = micro batch x "
				      "accumulation steps x world; give two of the three (or three "
				      "that agree), or change trainer.devices",
				      weft_cfg_where(tb ? tb : mb, where, sizeof(where)),
				      tb ? weft_cfg_scalar(tb) : "(unset)",
				      mb ? weft_cfg_scalar(mb) : "(unset)",
				      ga ? weft_cfg_scalar(ga) : "(unset)", (long long)world);
	}
}

static weft_status ds_fp16(struct ds *d, const weft_cfg *fp)
{
	static const char *const pass[][2] = {
		{ "initial_scale_power", "trainer.loss_scale.initial_scale_power" },
		{ "loss_scale_window", "trainer.loss_scale.loss_scale_window" },
		{ "hysteresis", "trainer.loss_scale.hysteresis" },
		{ "min_loss_scale", "trainer.loss_scale.min_loss_scale" },
	};
	weft_status st;

	if ((st = put(d, "trainer.precision", weft_cfg_get(fp, "enabled"), "16-mixed")))
		return st;
	for (size_t i = 0; i < weft_cfg_size(fp); i++) {
		const char *k = weft_cfg_key_at(fp, i);
		const weft_cfg *n = weft_cfg_at(fp, i);
		double ls = 0;
		size_t j;

		if (!strcmp(k, "enabled"))
			continue;
		if (!strcmp(k, "loss_scale")) {
			if ((st = weft_cfg_as_float(n, &ls)))
				return st;
			if (ls != 0)
				return weft_cfg_error(n, "is a fixed loss scale, and weft scales "
						      "dynamically only; use loss_scale: 0 with "
						      "initial_scale_power for the first scale");
			continue;
		}
		if (!strcmp(k, "auto_cast")) {
			ignore(d, "fp16.auto_cast");
			continue;
		}
		for (j = 0; j < sizeof(pass) / sizeof(pass[0]); j++)
			if (!strcmp(k, pass[j][0]))
				break;
		if (j == sizeof(pass) / sizeof(pass[0]))
			return weft_cfg_error(n, "weft has no fp16.%s, and leaving it out would "
					      "change the run; remove it (weft reads enabled, "
					      "loss_scale: 0, initial_scale_power, loss_scale_window, "
					      "hysteresis, min_loss_scale)", k);
		if ((st = put(d, pass[j][1], n, NULL)))
			return st;
	}
	return WEFT_OK;
}

static weft_status ds_zero(struct ds *d, const weft_cfg *zo)
{
	const weft_cfg *stage = weft_cfg_get(zo, "stage");
	const weft_cfg *sn = get2(weft_config_root(d->cfg), "trainer", "strategy");
	const char *yname = text_of(weft_cfg_kind_of(sn) == WEFT_CFG_MAP ? weft_cfg_get(sn, "name")
									 : sn);
	int64_t s = 0;
	char name[16], here[600], there[600];
	weft_status st;

	if (weft_cfg_kind_of(zo) != WEFT_CFG_MAP)
		return weft_cfg_error(zo, "must be a mapping like {stage: 2}");
	if (stage && (st = weft_cfg_as_int(stage, &s)))
		return st;
	if (s < 0 || s > 3)
		return weft_cfg_error(stage, "must be 0, 1, 2 or 3, got %lld", (long long)s);
	if (s == 0) {
		/* DeepSpeed's stage 0: plain data parallelism */
		return put(d, "trainer.strategy", stage ? stage : zo, "ddp");
	}
	snprintf(name, sizeof(name), "zero_%lld", (long long)s);
	if (yname && strcmp(yname, "auto") && strcmp(yname, name) && strcmp(yname, "zero"))
		return weft_error_set(WEFT_ERR_CONFIG, "%s: the DeepSpeed config's "
				      "zero_optimization asks for %s and the weft config says "
				      "trainer.strategy: %s (%s); remove one of them or make them "
				      "agree", weft_cfg_where(zo, there, sizeof(there)), name, yname,
				      weft_cfg_where(sn, here, sizeof(here)));
	if (sn && weft_cfg_kind_of(sn) == WEFT_CFG_MAP && weft_cfg_get(sn, "zero_optimization"))
		return weft_error_set(WEFT_ERR_CONFIG, "%s: zero_optimization is given twice, "
				      "in the DeepSpeed config and at trainer.strategy (%s); keep one",
				      weft_cfg_where(zo, there, sizeof(there)),
				      weft_cfg_where(sn, here, sizeof(here)));
	if (!sn || weft_cfg_kind_of(sn) != WEFT_CFG_MAP) {
		if ((st = weft_config_set(d->cfg, "trainer.strategy", "{}")) ||
		    (st = weft_config_set(d->cfg, "trainer.strategy.name", name)))
			return st;
	} else if ((st = weft_config_set(d->cfg, "trainer.strategy.name", name))) {
		return st;
	}
	return weft_config_graft(d->cfg, "trainer.strategy.zero_optimization", zo);
}

static weft_status ds_scheduler(struct ds *d, const weft_cfg *sc)
{
	static const char *const known[] = { "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", NULL };
	const weft_cfg *type = weft_cfg_get(sc, "type"), *params = weft_cfg_get(sc, "params");
	const char *t = text_of(type);
	char path[300];
	weft_status st;
	int k;

	if (weft_cfg_kind_of(sc) != WEFT_CFG_MAP || !t)
		return weft_cfg_error(sc, "must be a mapping {type: WarmupLR, params: {...}}");
	for (k = 0; known[k] && strcmp(known[k], t); k++)
		;
	if (!known[k])
		return weft_cfg_error(type, "'%s' has no weft equivalent; weft runs DeepSpeed's "
				      "WarmupLR, WarmupDecayLR and WarmupCosineLR (or give "
				      "lr_scheduler in the weft config: cosine, linear, step, warmup)",
				      t);
	if (weft_cfg_get(weft_config_root(d->cfg), "lr_scheduler"))
		return put(d, "lr_scheduler", sc, NULL);
	if ((st = weft_config_set(d->cfg, "lr_scheduler", "{}")) ||
	    (st = weft_config_graft(d->cfg, "lr_scheduler.name", type)))
		return st;
	for (size_t i = 0; params && i < weft_cfg_size(params); i++) {
		snprintf(path, sizeof(path), "lr_scheduler.%s", weft_cfg_key_at(params, i));
		if ((st = weft_config_graft(d->cfg, path, weft_cfg_at(params, i))))
			return st;
	}
	return WEFT_OK;
}

static weft_status ds_optimizer(struct ds *d, const weft_cfg *op)
{
	const weft_cfg *mine = weft_cfg_get(weft_config_root(d->cfg), "optimizer");
	char here[600], there[600];

	if (weft_cfg_kind_of(op) != WEFT_CFG_MAP)
		return weft_cfg_error(op, "must be a mapping {type: AdamW, params: {...}}");
	if (mine)
		return weft_error_set(WEFT_ERR_CONFIG, "%s: the optimizer is given twice, in the "
				      "DeepSpeed config and in the weft config (%s); keep one",
				      weft_cfg_where(op, there, sizeof(there)),
				      weft_cfg_where(mine, here, sizeof(here)));
	if (!weft_cfg_get(op, "type"))
		return weft_cfg_error(op, "needs type: (Adam, AdamW, SGD, Lion)");
	return optimizer_shape(d->cfg, op);
}

/* activation_checkpointing: DeepSpeed's block configures the checkpoints a
 * model's code asks for, each layer recomputed from its input: weft's
 * trainer.activation_checkpointing: full. Moving the checkpoints (across
 * ranks, to the host) is not implemented; the other keys tune DeepSpeed's
 * buffers and profiling and change nothing here. */
static weft_status ds_act_ckpt(struct ds *d, const weft_cfg *n)
{
	static const char *const moves[] = { "partition_activations", "cpu_checkpointing", NULL };
	static const char *const inert_keys[] = { "contiguous_memory_optimization",
						  "synchronize_checkpoint_boundary", "profile",
						  "number_checkpoints", NULL };

	if (weft_cfg_kind_of(n) != WEFT_CFG_MAP)
		return weft_cfg_error(n, "must be a mapping like {partition_activations: false}");
	for (size_t i = 0; i < weft_cfg_size(n); i++) {
		const char *k = weft_cfg_key_at(n, i);
		const weft_cfg *v = weft_cfg_at(n, i);
		int known = 0, on = 0;

		for (int j = 0; moves[j]; j++)
			if (!strcmp(k, moves[j])) {
				known = 1;
				if (weft_cfg_as_bool(v, &on))
					return weft_cfg_error(v, "must be true or false");
				if (on)
					return weft_cfg_error(v, "is not implemented by weft (its "
							      "checkpoints stay on the rank that "
							      "made them); set it to false");
			}
		for (int j = 0; inert_keys[j]; j++)
			known |= !strcmp(k, inert_keys[j]);
		if (!known)
			return weft_cfg_error(v, "is not a DeepSpeed activation_checkpointing key "
					      "weft knows (partition_activations, cpu_checkpointing, "
					      "contiguous_memory_optimization, number_checkpoints, "
					      "synchronize_checkpoint_boundary, profile); remove it");
	}
	return put(d, "trainer.activation_checkpointing", n, "full");
}

/* Top-level keys that change nothing in a weft run (logging, profiling,
 * checkpoint layout, memory-only features); ignored with one warning. */
static const char *const inert[] = {
	"wall_clock_breakdown", "memory_breakdown", "dump_state", "flops_profiler",
	"tensorboard", "wandb", "csv_monitor", "comms_logger", "monitor_config", "checkpoint",
	"aio", "zero_allow_untested_optimizer",
	"zero_force_ds_cpu_optimizer", "sparse_gradients", "autotuning", NULL
};

static weft_status ds_key(struct ds *d, const char *k, const weft_cfg *n)
{
	int on = 0;

	if (!strcmp(k, "train_batch_size") || !strcmp(k, "train_micro_batch_size_per_gpu") ||
	    !strcmp(k, "gradient_accumulation_steps"))
		return WEFT_OK; /* ds_batch */
	if (!strcmp(k, "optimizer"))
		return ds_optimizer(d, n);
	if (!strcmp(k, "scheduler"))
		return ds_scheduler(d, n);
	if (!strcmp(k, "fp16") || !strcmp(k, "bf16")) {
		const weft_cfg *en = weft_cfg_get(n, "enabled");

		if (weft_cfg_kind_of(n) != WEFT_CFG_MAP)
			return weft_cfg_error(n, "must be a mapping like {enabled: true}");
		if (en && weft_cfg_as_bool(en, &on))
			return weft_cfg_error(en, "must be true or false ('auto' is filled in by "
					      "Hugging Face's Trainer, not by weft: write the value)");
		if (!on)
			return WEFT_OK;
		if (k[0] == 'f')
			return ds_fp16(d, n);
		for (size_t i = 0; i < weft_cfg_size(n); i++)
			if (strcmp(weft_cfg_key_at(n, i), "enabled"))
				return weft_cfg_error(weft_cfg_at(n, i), "bf16.%s is not "
						      "implemented by weft; remove it (weft reads "
						      "bf16.enabled)", weft_cfg_key_at(n, i));
		return put(d, "trainer.precision", weft_cfg_get(n, "enabled"), "bf16-mixed");
	}
	if (!strcmp(k, "gradient_clipping"))
		return put(d, "trainer.gradient_clip_val", n, NULL);
	if (!strcmp(k, "zero_optimization"))
		return ds_zero(d, n);
	if (!strcmp(k, "activation_checkpointing"))
		return ds_act_ckpt(d, n);
	if (!strcmp(k, "steps_per_print"))
		return put(d, "trainer.log_every_n_steps", n, NULL);
	if (!strcmp(k, "prescale_gradients") || !strcmp(k, "zero_allow_untested_optimizer") ||
	    !strcmp(k, "sparse_gradients")) {
		if (!weft_cfg_as_bool(n, &on) && !on) {
			ignore(d, k);
			return WEFT_OK;
		}
	}
	for (int i = 0; inert[i]; i++)
		if (!strcmp(k, inert[i])) {
			ignore(d, k);
			return WEFT_OK;
		}
	if (weft_cfg_kind_of(n) == WEFT_CFG_MAP && disabled(n)) {
		ignore(d, k);
		return WEFT_OK;
	}
	return weft_cfg_error(n, "weft has no '%s', and ignoring it would change "
			      "the run; remove it (docs/config.md lists the DeepSpeed keys weft "
			      "reads and those it ignores)", k);
}

static weft_status deepspeed(weft_config *cfg, const char *path, int say)
{
	weft_config *dsc = NULL;
	struct ds d = { .cfg = cfg };
	int64_t world = world_of(cfg);
	weft_status st;

	st = weft_config_load_file(path, &dsc);
	if (st)
		return weft_error_wrap(st, "the DeepSpeed config");
	d.root = weft_config_root(dsc);
	if (weft_cfg_kind_of(d.root) != WEFT_CFG_MAP) {
		st = weft_cfg_error(d.root, "a DeepSpeed config is a JSON object like "
				    "{\"train_batch_size\": 64, ...}");
		goto out;
	}
	if (enabled(weft_cfg_get(d.root, "fp16")) && enabled(weft_cfg_get(d.root, "bf16"))) {
		st = weft_cfg_error(weft_cfg_get(d.root, "bf16"), "and fp16 are both enabled; "
				    "enable one");
		goto out;
	}
	st = ds_batch(&d, world);
	for (size_t i = 0; !st && i < weft_cfg_size(d.root); i++)
		st = ds_key(&d, weft_cfg_key_at(d.root, i), weft_cfg_at(d.root, i));
	if (!st && d.ignored[0] && say)
		weft_log(WEFT_LOG_WARN, "%s: ignored DeepSpeed keys (they change nothing in a weft "
			 "run): %s", path, d.ignored);
out:
	weft_config_free(dsc);
	return st;
}

/* The DeepSpeed file: --deepspeed, else the `deepspeed:` key relative to
 * the config's folder; written into `buf`. Empty when there is none. */
static weft_status deepspeed_path(weft_config *cfg, const char *config_path, const char *arg,
				  char *buf, size_t len)
{
	const weft_cfg *n = weft_cfg_get(weft_config_root(cfg), "deepspeed");
	const char *p = NULL, *slash;
	weft_status st;

	buf[0] = 0;
	if (n && weft_cfg_kind_of(n) != WEFT_CFG_NULL && (st = weft_cfg_as_str(n, &p)))
		return st;
	if (arg && p)
		return weft_cfg_error(n, "names a DeepSpeed config and so does --deepspeed %s; "
				      "give one", arg);
	if (arg) {
		snprintf(buf, len, "%s", arg);
		return WEFT_OK;
	}
	if (!p)
		return WEFT_OK;
	slash = config_path ? strrchr(config_path, '/') : NULL;
	if (p[0] == '/' || !slash)
		snprintf(buf, len, "%s", p);
	else
		snprintf(buf, len, "%.*s/%s", (int)(slash - config_path), config_path, p);
	return WEFT_OK;
}

weft_status weft_config_compat(weft_config *cfg, const char *config_path,
			       const char *deepspeed_arg)
{
	char path[4096];
	int cuda = 0, say;
	weft_status st;

	if (!cfg)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "weft_config_compat: NULL config");
	if ((st = lightning_accelerator(cfg, &cuda)) || (st = lightning_devices(cfg, cuda)))
		return st;
	say = speaks();
	if ((st = lightning_strategy(cfg, say)) || (st = lightning_precision(cfg)) ||
	    (st = optimizer_yaml(cfg)) ||
	    (st = deepspeed_path(cfg, config_path, deepspeed_arg, path, sizeof(path))))
		return st;
	if (path[0] && (st = deepspeed(cfg, path, say)))
		return st;
	/* done: a second call finds no file to translate */
	if (path[0] && weft_cfg_get(weft_config_root(cfg), "deepspeed"))
		st = weft_config_set(cfg, "deepspeed", "null");
	return st;
}
