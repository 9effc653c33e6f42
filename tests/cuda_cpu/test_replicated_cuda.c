/* The replicated strategies' optimizer step when the model's flat
 * parameters and gradients live on a CUDA device
 * (plugins/strategies/ddp/replicated_device.c), on a machine without a GPU.
 *
 * A fake CUDA library (fake_cuda.h) provides a kernel table whose "device"
 * memory faults on any CPU access, its staging copies, and host
 * emulations of the fused adamw_step and sum_squares in the CUDA kernels'
 * order of operations. Strategy "single" runs N steps on parameters made
 * on cuda:0 (so in that memory), with a deterministic gradient written by
 * the forward_backward callback through the fake's translation, and the
 * same N steps on the CPU. Properties:
 *   - nothing reads device memory from the CPU: the run does not crash,
 *     and every copy and kernel call had device memory where device memory
 *     belongs (the fake counts the others);
 *   - the parameters and the optimizer state after N steps are
 *     bit-identical to the CPU run: the host-staged path runs the same
 *     optimizer code on the same values; the fused path's kernel rounds as
 *     the CPU adamw does, and the clipping norm, summed in another order
 *     in double (~1e-16 relative), gives the same float clip factor unless
 *     it falls within 1e-16 of a float rounding boundary, which these
 *     fixed inputs do not (the run is deterministic: it cannot flake);
 *   - adamw takes the fused kernel; sgd, adam with amsgrad and adamw
 *     without the kernel are host-staged; the INFO line says which;
 *   - the checkpoint view holds the state in host memory, and state
 *     written into it (a checkpoint loaded) is what the next step uses;
 *   - ddp on 2 ranks (threads, comm gloo staging the fake device memory,
 *     rank 1 starting from other weights) equals the CPU run bit for bit;
 *   - every pinned and device block is freed with the strategy;
 *   - strategies that cannot run on CUDA refuse it at create with advice;
 *   - a tensor allocated on cuda:0 is counted on the device's memory
 *     counters (weft_mem_get_split_stats), to the byte, not the host's;
 *   - on an older weft whose host table lacks cuda_extras (ABI 1.3) the
 *     strategy refuses cuda naming both versions. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/dist.h"
#include "fake_cuda.h"
#include "plugin/loader_impl.h"
#include "plugin/registry.h"
#include "weft/autograd.h"
#include "weft/config.h"
#include "weft/log.h"
#include "weft/strategy.h"
#include "weft/tensor.h"
#include "weft_test.h"

#define STEPS 6

/* WT_CHECK with a message on failure */
#define CHECKF(cond, ...)                                                          \
	do {                                                                        \
		int ok_ = !!(cond);                                                 \
		WT_CHECK(ok_);                                                      \
		if (!ok_) {                                                         \
			fprintf(stderr, __VA_ARGS__);                               \
			fputc('\n', stderr);                                        \
		}                                                                   \
	} while (0)
#define NP 4

static weft_registry *reg;
static const weft_strategy_ops *single_ops;
static fake_cuda_dev_host_fn dev_host;
static fake_cuda_get_stats_fn get_stats;
static fake_cuda_offer_fused_fn offer_fused;

static const struct {
	const char *name;
	int32_t ndim;
	int64_t shape[2];
} param_defs[NP] = {
	{ "layer.weight", 2, { 24, 16 } },
	{ "layer.bias", 1, { 16 } },
	{ "norm.weight", 1, { 16 } },
	{ "head.weight", 2, { 10, 16 } },
};

/* One run: a model (a parameter set), its optimizer, the strategy. */
typedef struct run {
	const weft_strategy_ops *ops; /* the strategy: single unless set */
	const weft_cfg *section;      /* its section, or NULL */
	int cuda;
	weft_params *ps;
	weft_ctx *ctx;
	weft_config *optim_cfg;
	const weft_optim_ops *optim_ops;
	void *optim;
	weft_optim_segment segs[NP];
	weft_strategy_env env;
	void *strat;
	int step;          /* the global step being run (0-based) */
	int64_t numel;
	double grad_norm[STEPS];
} run;

/* Host view of a flat buffer, wherever it lives. */
static float *host_view(const run *r, void *data)
{
	return r->cuda ? dev_host(data) : data;
}

/* The gradient of step s: a smooth function of the parameters (so the
 * trajectory depends on every update) plus a step-dependent term. Large
 * enough that clipping at 1 is active. Adds into the gradients, as
 * backward does. */
static weft_status cb_forward_backward(void *trainer, const weft_micro_batch *b,
				       double loss_scale, double *loss)
{
	run *r = trainer;
	weft_tensor *flat, *flat_grad;
	const float *p;
	float *g;
	double l = 0.0;

	(void)b;
	weft_params_flat(r->ps, WEFT_F32, &flat, &flat_grad);
	p = host_view(r, flat->data);
	g = host_view(r, flat_grad->data);
	for (int64_t i = 0; i < r->numel; i++) {
		float gi = 0.5f * sinf(0.37f * (float)i + (float)r->step) + 0.3f * p[i];

		g[i] += (float)loss_scale * gi;
		l += (double)p[i] * p[i];
	}
	*loss = l / (double)r->numel;
	return WEFT_OK;
}

static weft_status cb_evaluate(void *trainer, const weft_micro_batch *b, weft_eval_report *rep)
{
	(void)trainer;
	(void)b;
	(void)rep;
	return WEFT_OK;
}

/* Builds the model and the optimizer of a run; no strategy yet. */
static weft_status run_init(run *r, int cuda, const char *optim_name, const char *optim_yaml,
			    double clip)
{
	weft_device dev = cuda ? (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 } : WEFT_CPU;
	weft_tensor *flat;
	const void *vt;
	float *init;
	weft_status st;

	memset(r, 0, sizeof(*r));
	r->cuda = cuda;
	st = weft_params_create(dev, &r->ps);
	for (int i = 0; !st && i < NP; i++) {
		weft_tensor *t;

		st = weft_params_add(r->ps, param_defs[i].name, WEFT_F32, param_defs[i].ndim,
				     param_defs[i].shape, &t);
	}
	if (!st)
		st = weft_params_finalize(r->ps, 1);
	if (!st)
		st = weft_ctx_create(&(weft_ctx_options){ .device = dev }, &r->ctx);
	if (!st)
		st = weft_registry_find(reg, WEFT_PLUGIN_OPTIM, optim_name, &vt, NULL);
	if (!st)
		st = weft_config_load_string("optimizer", optim_yaml, strlen(optim_yaml),
					     &r->optim_cfg);
	if (st)
		return st;
	r->optim_ops = vt;
	st = r->optim_ops->create(weft_config_root(r->optim_cfg), &r->optim);
	if (st)
		return st;
	weft_params_flat(r->ps, WEFT_F32, &flat, NULL);
	r->numel = weft_tensor_numel(flat);
	for (int i = 0; i < NP; i++) {
		weft_tensor *p = weft_params_at(r->ps, (size_t)i);

		r->segs[i] = (weft_optim_segment){
			.name = p->name,
			.offset = (int64_t)((const char *)p->data - (const char *)flat->data) / 4,
			.numel = weft_tensor_numel(p),
			.ndim = p->ndim,
			.decay = p->ndim >= 2,
		};
	}
	/* the same starting weights on both devices */
	init = malloc((size_t)r->numel * sizeof(float));
	if (!init)
		return WEFT_ERR_NOMEM;
	for (int64_t i = 0; i < r->numel; i++)
		init[i] = 0.2f * cosf(0.11f * (float)i) - 0.05f;
	st = weft_tensor_copy_from_host(flat, init, (size_t)r->numel * sizeof(float));
	free(init);
	if (st)
		return st;
	r->env = (weft_strategy_env){
		.struct_size = sizeof(r->env),
		.rank = 0,
		.world_size = 1,
		.local_rank = 0,
		.local_world_size = 1,
		.device = dev,
		.comm_timeout_ms = 10000,
		.ctx = r->ctx,
		.params = r->ps,
		.optim_ops = r->optim_ops,
		.optim = r->optim,
		.segs = r->segs,
		.nseg = NP,
		.gradient_clip_val = clip,
		.forward_backward = cb_forward_backward,
		.evaluate = cb_evaluate,
		.trainer = r,
	};
	return WEFT_OK;
}

static weft_status run_setup(run *r)
{
	weft_status st;

	if (!r->ops)
		r->ops = single_ops;
	st = r->ops->create(r->section, &r->env, &r->strat);
	return st ? st : r->ops->setup(r->strat);
}

/* Steps [first, last) of the schedule (lr changes every step). */
static weft_status run_steps(run *r, int first, int last)
{
	weft_micro_batch mb = { .rows = 1 };

	for (int s = first; s < last; s++) {
		weft_step_input in = {
			.struct_size = sizeof(in),
			.micro = &mb,
			.n_micro = 1,
			.optim = { .struct_size = sizeof(weft_optim_step_info), .step = s + 1,
				   .lr = 0.02 * (1.0 + 0.1 * s), .grad_scale = 1.0 },
		};
		weft_step_report rep = { .struct_size = sizeof(rep) };
		weft_status st;

		r->step = s;
		st = r->ops->train_step(r->strat, &in, &rep);
		if (st)
			return st;
		r->grad_norm[s] = rep.grad_norm;
	}
	return WEFT_OK;
}

/* The parameters in host memory (a copy). */
static float *run_weights(const run *r)
{
	weft_tensor *flat;
	float *w = malloc((size_t)r->numel * sizeof(float));

	weft_params_flat(r->ps, WEFT_F32, &flat, NULL);
	if (w && weft_tensor_copy_to_host(flat, w, (size_t)r->numel * sizeof(float)) != WEFT_OK) {
		free(w);
		w = NULL;
	}
	return w;
}

static void run_free(run *r)
{
	if (r->strat)
		r->ops->destroy(r->strat);
	r->strat = NULL;
	if (r->optim)
		r->optim_ops->destroy(r->optim);
	weft_config_free(r->optim_cfg);
	weft_ctx_free(r->ctx);
	weft_params_free(r->ps);
	memset(r, 0, sizeof(*r));
}

/* Runs fn with stderr going to a file; the text it wrote in buf. */
static weft_status capture_stderr(weft_status (*fn)(run *), run *r, char *buf, size_t len)
{
	char path[] = "/tmp/weft_test_replicated_cuda_XXXXXX";
	int fd = mkstemp(path), saved;
	weft_status st;
	ssize_t n;

	buf[0] = '\0';
	if (fd < 0)
		return fn(r);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	st = fn(r);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, len - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(path);
	return st;
}

static int same_bits(const float *a, const float *b, int64_t n, const char *what,
		     const char *label)
{
	for (int64_t i = 0; i < n; i++) {
		if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
			fprintf(stderr, "%s: %s differ first at element %lld: %.9g (cuda) vs %.9g "
				"(cpu)\n", label, what, (long long)i, a[i], b[i]);
			return 0;
		}
	}
	return 1;
}

/* One optimizer on cuda against the CPU: bit-identical parameters and
 * state, the same norms, the expected path, nothing touched on the wrong
 * side, everything freed. */
static void compare(const char *label, const char *optim_name, const char *yaml, double clip,
		    int fused_offered, int expect_fused, int64_t expect_runs)
{
	run cpu, dev;
	weft_strategy_state sc = { .struct_size = sizeof(sc) }, sd = { .struct_size = sizeof(sd) };
	fake_cuda_stats before, after;
	char log[4096];
	float *wc = NULL, *wd = NULL;

	offer_fused(fused_offered);
	get_stats(&before);
	WT_OK(run_init(&cpu, 0, optim_name, yaml, clip));
	WT_OK(run_setup(&cpu));
	WT_OK(run_steps(&cpu, 0, STEPS));
	WT_OK(run_init(&dev, 1, optim_name, yaml, clip));
	WT_OK(capture_stderr(run_setup, &dev, log, sizeof(log)));
	CHECKF(strstr(log, expect_fused ? "(fused kernel)" : "(host-staged") != NULL,
		 "%s: setup logged '%s'", label, log);
	CHECKF(strstr(log, optim_name) && strstr(log, "on cuda:0"), "%s: log '%s'", label, log);
	WT_OK(run_steps(&dev, 0, STEPS));
	wc = run_weights(&cpu);
	wd = run_weights(&dev);
	CHECKF(wc && wd && same_bits(wd, wc, cpu.numel, "parameters", label),
		 "%s: parameters after %d steps", label, STEPS);
	/* the weights moved: a run that never stepped would also "match" */
	CHECKF(wd && fabsf(wd[0] - (0.2f - 0.05f)) > 1e-4f, "%s: weights moved", label);
	for (int s = 0; s < STEPS; s++) {
		if (clip > 0)
			WT_CLOSE(dev.grad_norm[s], cpu.grad_norm[s], 1e-12, 0.0);
		else
			WT_CHECK(dev.grad_norm[s] < 0 && cpu.grad_norm[s] < 0);
	}
	/* clipping was active: the norms exceed the limit */
	CHECKF(clip <= 0 || cpu.grad_norm[0] > clip, "%s: norm %g", label, cpu.grad_norm[0]);
	WT_OK(single_ops->state(cpu.strat, &sc));
	WT_OK(single_ops->state(dev.strat, &sd));
	WT_CHECK(sd.n_slots == sc.n_slots && sd.begin == 0 && sd.end == cpu.numel);
	for (uint32_t k = 0; k < sd.n_slots && k < sc.n_slots; k++)
		CHECKF(same_bits(sd.slots[k], sc.slots[k], cpu.numel, "optimizer state", label),
			 "%s: slot %u", label, k);
	get_stats(&after);
	CHECKF(after.bad_copies == before.bad_copies && after.bad_calls == before.bad_calls,
		 "%s: %lld copies and %lld calls with memory on the wrong side", label,
		 (long long)(after.bad_copies - before.bad_copies),
		 (long long)(after.bad_calls - before.bad_calls));
	if (expect_fused) {
		CHECKF(after.adamw_launches - before.adamw_launches == STEPS * expect_runs,
			 "%s: %lld fused launches", label,
			 (long long)(after.adamw_launches - before.adamw_launches));
		WT_CHECK(after.adamw_elements - before.adamw_elements == STEPS * cpu.numel);
		WT_CHECK(after.sumsq_calls - before.sumsq_calls == (clip > 0 ? STEPS : 0));
	} else {
		WT_CHECK(after.adamw_launches == before.adamw_launches);
		/* per step: gradients and parameters down, parameters up */
		CHECKF(after.copies_to_host - before.copies_to_host == 2 * STEPS &&
			 after.copies_to_device - before.copies_to_device == STEPS,
			 "%s: %lld copies down, %lld up", label,
			 (long long)(after.copies_to_host - before.copies_to_host),
			 (long long)(after.copies_to_device - before.copies_to_device));
	}
	free(wc);
	free(wd);
	run_free(&cpu);
	run_free(&dev);
	get_stats(&after);
	CHECKF(after.pinned_live == 0 && after.pinned_bytes == 0 && after.dev_live == 0,
		 "%s: %lld pinned and %lld device blocks left", label,
		 (long long)after.pinned_live, (long long)after.dev_live);
	offer_fused(1);
}

/* A checkpoint in the middle: state read out after 3 steps, loaded into a
 * fresh strategy with the weights, 3 more steps: the same bits as 6 steps
 * straight. Fused (state on the device, a host mirror) and host-staged. */
static void resume(const char *label, int fused)
{
	const char *yaml = "{name: adamw, lr: 0.02, weight_decay: 0.1}";
	run a, b;
	weft_strategy_state ss = { .struct_size = sizeof(ss) };
	float *slots = NULL, *w_mid = NULL, *wa = NULL, *wb = NULL;
	weft_tensor *flat;
	int64_t n;

	offer_fused(fused);
	WT_OK(run_init(&a, 1, "adamw", yaml, 1.0));
	WT_OK(run_setup(&a));
	WT_OK(run_steps(&a, 0, STEPS));
	WT_OK(run_init(&b, 1, "adamw", yaml, 1.0));
	WT_OK(run_setup(&b));
	WT_OK(run_steps(&b, 0, STEPS / 2));
	n = b.numel;
	/* "save": the state view and the weights */
	WT_OK(single_ops->state(b.strat, &ss));
	slots = malloc((size_t)(2 * n) * sizeof(float));
	WT_CHECK(slots && ss.n_slots == 2);
	if (!slots || ss.n_slots != 2)
		goto out;
	memcpy(slots, ss.slots[0], (size_t)n * sizeof(float));
	memcpy(slots + n, ss.slots[1], (size_t)n * sizeof(float));
	w_mid = run_weights(&b);
	/* "load" into a fresh strategy on the same model: state written into
	 * the view, weights copied to the device */
	single_ops->destroy(b.strat);
	b.strat = NULL;
	weft_params_flat(b.ps, WEFT_F32, &flat, NULL);
	WT_OK(weft_tensor_fill(flat, 0.0f));
	WT_OK(run_setup(&b));
	WT_OK(single_ops->state(b.strat, &ss));
	memcpy(ss.slots[0], slots, (size_t)n * sizeof(float));
	memcpy(ss.slots[1], slots + n, (size_t)n * sizeof(float));
	/* asked again before any step (a save right after the load, or after
	 * a skipped step): the loaded state, not the device's fresh zeros */
	WT_OK(single_ops->state(b.strat, &ss));
	CHECKF(same_bits(ss.slots[1], slots + n, n, "state read twice", label), "%s", label);
	WT_OK(weft_tensor_copy_from_host(flat, w_mid, (size_t)n * sizeof(float)));
	WT_OK(run_steps(&b, STEPS / 2, STEPS));
	wa = run_weights(&a);
	wb = run_weights(&b);
	CHECKF(wa && wb && same_bits(wb, wa, n, "resumed parameters", label),
		 "%s: resumed run", label);
out:
	free(slots);
	free(w_mid);
	free(wa);
	free(wb);
	run_free(&a);
	run_free(&b);
	offer_fused(1);
}

/* ---- ddp: 2 ranks (threads) over comm gloo on the fake device memory ---- */

#define DDP_RANKS 2

static const weft_strategy_ops *ddp_ops;
static const weft_comm_ops *gloo_ops;
static weft_store_server *srv;
static float *ddp_weights[DDP_RANKS];
static weft_status ddp_status[DDP_RANKS];
static char ddp_error[DDP_RANKS][512];

/* One rank: its own model on cuda:0 (rank 1 starts from other weights, so
 * only setup's broadcast can make the runs agree), gloo on CUDA buffers,
 * strategy ddp, the same steps. Every rank computes the same gradient, so
 * the average is that gradient exactly ((g + g) / 2 = g in float) and the
 * run must equal the one-process CPU run bit for bit. The callback never
 * runs autograd, so no bucket hook fires: find_unused_parameters makes ddp
 * all-reduce every bucket as it is at the end of the step. */
static void *ddp_rank(void *arg)
{
	int rank = (int)(intptr_t)arg;
	const char *yaml = "{name: ddp, find_unused_parameters: true}";
	weft_store_client *cl = NULL;
	weft_config *cfg = NULL;
	weft_comm *comm = NULL;
	weft_tensor *flat;
	run r;
	weft_status st;

	st = run_init(&r, 1, "adamw", "{name: adamw, lr: 0.02, weight_decay: 0.1}", 1.0);
	if (!st && rank == 1) {
		weft_params_flat(r.ps, WEFT_F32, &flat, NULL);
		st = weft_tensor_fill(flat, 0.5f);
	}
	if (!st)
		st = weft_config_load_string("strategy", yaml, strlen(yaml), &cfg);
	if (!st)
		st = weft_store_connect("127.0.0.1", weft_store_server_port(srv), "ddp", 10000,
					&cl);
	if (!st)
		st = gloo_ops->init(&(weft_comm_init_args){
			.struct_size = sizeof(weft_comm_init_args),
			.rank = rank,
			.size = DDP_RANKS,
			.store = weft_store_client_vtable(cl),
			.name = "ddp-world",
			.timeout_ms = 20000,
			.device = WEFT_COMM_DEVICE_CUDA,
			.device_index = 0,
			.bind_host = "127.0.0.1",
		}, &comm);
	if (!st) {
		r.ops = ddp_ops;
		r.section = weft_config_root(cfg);
		r.env.rank = rank;
		r.env.world_size = DDP_RANKS;
		r.env.local_rank = rank;
		r.env.local_world_size = DDP_RANKS;
		r.env.comm_ops = gloo_ops;
		r.env.world = comm;
		st = run_setup(&r);
	}
	if (!st)
		st = run_steps(&r, 0, STEPS);
	if (!st)
		ddp_weights[rank] = run_weights(&r);
	if (st)
		snprintf(ddp_error[rank], sizeof(ddp_error[rank]), "%s", weft_error_last());
	ddp_status[rank] = st;
	run_free(&r);
	if (comm)
		gloo_ops->destroy(comm);
	if (cl)
		weft_store_client_close(cl);
	weft_config_free(cfg);
	return NULL;
}

static void ddp_two_ranks(void)
{
	pthread_t th[DDP_RANKS];
	fake_cuda_stats before, after;
	float *want;
	run cpu;

	WT_OK(run_init(&cpu, 0, "adamw", "{name: adamw, lr: 0.02, weight_decay: 0.1}", 1.0));
	WT_OK(run_setup(&cpu));
	WT_OK(run_steps(&cpu, 0, STEPS));
	want = run_weights(&cpu);
	get_stats(&before);
	WT_OK(weft_store_server_start("127.0.0.1", 0, "ddp", &srv));
	for (int r = 0; r < DDP_RANKS; r++)
		WT_REQUIRE(pthread_create(&th[r], NULL, ddp_rank, (void *)(intptr_t)r) == 0);
	for (int r = 0; r < DDP_RANKS; r++)
		pthread_join(th[r], NULL);
	weft_store_server_stop(srv);
	get_stats(&after);
	for (int r = 0; r < DDP_RANKS; r++) {
		CHECKF(ddp_status[r] == WEFT_OK, "ddp rank %d: %s", r, ddp_error[r]);
		CHECKF(want && ddp_weights[r] &&
		       same_bits(ddp_weights[r], want, cpu.numel, "ddp parameters", "ddp"),
		       "ddp rank %d against one CPU process", r);
		free(ddp_weights[r]);
	}
	/* fused on both ranks (3 runs a step), the gradients reduced through
	 * pinned memory, nothing on the wrong side, everything freed */
	CHECKF(after.adamw_launches - before.adamw_launches == DDP_RANKS * STEPS * 3,
	       "ddp: %lld fused launches", (long long)(after.adamw_launches - before.adamw_launches));
	WT_CHECK(after.copies_to_host > before.copies_to_host);
	WT_CHECK(after.bad_copies == before.bad_copies && after.bad_calls == before.bad_calls);
	WT_CHECK(after.pinned_live == 0 && after.dev_live == 0);
	free(want);
	run_free(&cpu);
}

/* A strategy asked to run on cuda in a process without the CUDA library
 * refuses with the reason; before the fake is loaded. */
static void no_library(void)
{
	run r;

	WT_OK(run_init(&r, 0, "sgd", "{name: sgd, lr: 0.1}", 0.0));
	r.env.device = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 };
	WT_FAILS(run_setup(&r), WEFT_ERR_UNSUPPORTED, "parameters are on cuda:0",
		 "weft_kernels_cuda.so is not loaded", "use accelerator: cpu");
	run_free(&r);
}

/* A strategy built for ABI 1.3 loaded by an older weft, whose host table
 * ends before cuda_extras: on cuda it refuses, naming both versions,
 * instead of reading past the table. The plugin's entry is called again
 * with such a table (the registry loaded it with the real one, which is
 * given back afterwards). */
static void old_host(void)
{
	weft_host old = *weft_host_services();
	weft_plugin_entry_fn entry = NULL;
	Dl_info info;
	void *h = NULL;
	run r;

	old.head.abi_version = WEFT_ABI_MAKE(1, 2);
	old.head.struct_size = (uint32_t)offsetof(weft_host, cuda_extras);
	WT_REQUIRE(dladdr((const void *)single_ops, &info) && info.dli_fname);
	h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
	WT_REQUIRE(h != NULL);
	entry = (weft_plugin_entry_fn)(uintptr_t)dlsym(h, WEFT_PLUGIN_ENTRY_SYMBOL);
	WT_REQUIRE(entry != NULL);
	WT_REQUIRE(entry(&old) != NULL);
	WT_OK(run_init(&r, 0, "sgd", "{name: sgd, lr: 0.1}", 0.0));
	r.env.device = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 };
	WT_FAILS(run_setup(&r), WEFT_ERR_UNSUPPORTED, "parameters are on cuda:0",
		 "host has no cuda_extras (ABI 1.2, 1.3 needed)", "accelerator: cpu");
	run_free(&r);
	WT_REQUIRE(entry(weft_host_services()) != NULL);
	dlclose(h); /* the registry keeps it loaded */
}

/* pp is only created here (on cuda it checks the optimizer and the mesh
 * before building a stage): the env must offer stages, which this test
 * never builds. */
static weft_status cb_stage_create(void *trainer, uint32_t parts, int64_t layer_begin,
				   int64_t layer_end, void **stage, weft_params **params)
{
	(void)trainer;
	(void)parts;
	(void)layer_begin;
	(void)layer_end;
	*stage = NULL;
	*params = NULL;
	return WEFT_ERR_UNSUPPORTED;
}

static weft_status cb_stage_forward(void *trainer, void *stage, weft_ctx *ctx,
				    const weft_micro_batch *b, weft_tensor *x, int train,
				    double loss_scale, weft_tensor **out, double *loss,
				    weft_eval_report *rep)
{
	(void)trainer;
	(void)stage;
	(void)ctx;
	(void)b;
	(void)x;
	(void)train;
	(void)loss_scale;
	(void)loss;
	(void)rep;
	*out = NULL;
	return WEFT_ERR_UNSUPPORTED;
}

static void cb_stage_free(void *trainer, void *stage)
{
	(void)trainer;
	(void)stage;
}

/* Strategies that keep shards in host memory refuse a CUDA device when
 * created, naming themselves and pointing at ddp; zero, pp and tp refuse
 * only an optimizer they cannot step on the device, and hybrid a mesh
 * with dp or tp replicas. */
static void refusals(void)
{
	static const struct {
		const char *name, *yaml, *says;
	} cases[] = {
		{ "dp", NULL, "strategy 'dp' spreads over CPU threads only" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const void *vt;
		const weft_strategy_ops *ops;
		weft_config *cfg = NULL;
		void *s = NULL;
		run r;

		WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, cases[i].name, &vt, NULL));
		ops = vt;
		WT_OK(run_init(&r, 0, "sgd", "{name: sgd, lr: 0.1}", 0.0));
		r.env.device = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 };
		r.env.stage_create = cb_stage_create;
		r.env.stage_forward = cb_stage_forward;
		r.env.stage_free = cb_stage_free;
		if (cases[i].yaml)
			WT_OK(weft_config_load_string("strategy", cases[i].yaml,
						      strlen(cases[i].yaml), &cfg));
		WT_FAILS(ops->create(cfg ? weft_config_root(cfg) : NULL, &r.env, &s),
			 WEFT_ERR_UNSUPPORTED, cases[i].says, "use strategy: ddp");
		if (s)
			ops->destroy(s);
		weft_config_free(cfg);
		run_free(&r);
	}
	/* zero, pp and tp step adam, adamw and sgd on the device (the kernel
	 * table's optim_step); an optimizer that describes no device update is
	 * refused with the optimizers that run */
	for (int which = 0; which < 3; which++) {
		const char *name = which == 1 ? "pp" : which == 2 ? "tp" : "zero_2";
		const char *yaml = "{name: pp, pp: 1}";
		const void *vt;
		const weft_strategy_ops *ops;
		weft_config *cfg = NULL;
		const weft_cfg *sec = NULL;
		void *s = NULL;
		run r;

		if (which == 1) {
			WT_OK(weft_config_load_string("strategy", yaml, strlen(yaml), &cfg));
			sec = weft_config_root(cfg);
		}
		WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, name, &vt, NULL));
		ops = vt;
		WT_OK(run_init(&r, 0, "sgd", "{name: sgd, lr: 0.1}", 0.0));
		r.env.device = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 };
		r.env.stage_create = cb_stage_create;
		r.env.stage_forward = cb_stage_forward;
		r.env.stage_free = cb_stage_free;
		WT_OK(ops->create(sec, &r.env, &s));
		ops->destroy(s);
		s = NULL;
		run_free(&r);
		WT_OK(run_init(&r, 0, "lion", "{name: lion, lr: 0.0001}", 0.0));
		r.env.device = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 };
		r.env.stage_create = cb_stage_create;
		r.env.stage_forward = cb_stage_forward;
		r.env.stage_free = cb_stage_free;
		WT_FAILS(ops->create(sec, &r.env, &s), WEFT_ERR_UNSUPPORTED,
			 "optimizer 'lion' has no device kernel", "use optimizer adam, adamw or sgd");
		if (s)
			ops->destroy(s);
		run_free(&r);
		weft_config_free(cfg);
	}
}

/* A PARAMS tensor on cuda:0 lands on the device's counters, exactly, and
 * leaves the host's as they were; freeing it takes it off again. */
static void device_counted(void)
{
	int64_t shape[1] = { 1000 };
	weft_mem_stats h0, d0, h1, d1;
	weft_tensor *t = NULL;

	weft_mem_get_split_stats(&h0, &d0);
	WT_OK(weft_tensor_alloc("p", WEFT_F32, 1, shape,
				(weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 },
				WEFT_MEM_PARAMS, &t));
	weft_mem_get_split_stats(&h1, &d1);
	WT_CHECK(d1.current[WEFT_MEM_PARAMS] - d0.current[WEFT_MEM_PARAMS] == 4000);
	WT_CHECK(h1.current[WEFT_MEM_PARAMS] == h0.current[WEFT_MEM_PARAMS]);
	weft_tensor_free(t);
	weft_mem_get_split_stats(&h1, &d1);
	WT_CHECK(d1.current[WEFT_MEM_PARAMS] == d0.current[WEFT_MEM_PARAMS]);
}

int main(void)
{
	void *fake;
	fake_cuda_kernels_fn kernels;

	weft_log_set_level(WEFT_LOG_INFO);
	WT_OK(weft_registry_create(&reg));
	WT_OK(weft_registry_add_default_paths(reg));
	{
		const void *vt;

		WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "single", &vt, NULL));
		single_ops = vt;
	}
	if (!single_ops)
		return wt_done("test_replicated_cuda");
	refusals();
	no_library();
	old_host();

	/* the fake is found by file name among the loaded objects, as the real
	 * library is */
	fake = dlopen(WEFT_FAKE_CUDA_SO, RTLD_NOW | RTLD_LOCAL);
	CHECKF(fake != NULL, "%s", dlerror());
	if (!fake)
		return wt_done("test_replicated_cuda");
	((fake_cuda_setup_fn)(uintptr_t)dlsym(fake, "fake_cuda_setup"))(weft_host_services());
	dev_host = (fake_cuda_dev_host_fn)(uintptr_t)dlsym(fake, "fake_cuda_dev_host");
	get_stats = (fake_cuda_get_stats_fn)(uintptr_t)dlsym(fake, "fake_cuda_get_stats");
	offer_fused = (fake_cuda_offer_fused_fn)(uintptr_t)dlsym(fake, "fake_cuda_offer_fused");
	kernels = (fake_cuda_kernels_fn)(uintptr_t)dlsym(fake, "fake_cuda_kernels");
	WT_CHECK(dev_host && get_stats && offer_fused && kernels);
	if (!dev_host || !get_stats || !offer_fused || !kernels)
		return wt_done("test_replicated_cuda");
	WT_OK(weft_kernels_register(WEFT_DEVICE_CUDA, kernels()));
	device_counted();

	/* adamw: decay on the two matrices, none on the vectors between them:
	 * 3 fused launches per step */
	compare("adamw fused, clipped", "adamw", "{name: adamw, lr: 0.02, weight_decay: 0.1}",
		1.0, 1, 1, 3);
	compare("adamw fused", "adamw", "{name: adamw, lr: 0.02, weight_decay: 0.1}", 0.0, 1, 1,
		3);
	/* adam without decay is adamw's update: one launch over everything */
	compare("adam fused", "adam", "{name: adam, lr: 0.02}", 1.0, 1, 1, 1);
	compare("adamw staged (no kernel)", "adamw", "{name: adamw, lr: 0.02, weight_decay: 0.1}",
		1.0, 0, 0, 0);
	compare("adam amsgrad staged", "adam",
		"{name: adam, lr: 0.02, amsgrad: true, weight_decay: 0.01}", 1.0, 1, 0, 0);
	compare("sgd staged", "sgd", "{name: sgd, lr: 0.05, momentum: 0.9, nesterov: true}", 1.0,
		1, 0, 0);
	compare("lion staged", "lion", "{name: lion, lr: 0.001}", 0.0, 1, 0, 0);
	{
		const void *vt;

		WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "ddp", &vt, NULL));
		ddp_ops = vt;
		WT_OK(weft_registry_find(reg, WEFT_PLUGIN_COMM, "gloo", &vt, NULL));
		gloo_ops = vt;
		if (ddp_ops && gloo_ops)
			ddp_two_ranks();
	}
	resume("resume fused", 1);
	resume("resume staged", 0);

	weft_registry_free(reg);
	/* the fake stays loaded: the core's kernel registry points into it */
	return wt_done("test_replicated_cuda");
}
