/* GPT training-step benchmark, single process: forward, backward and an
 * AdamW update on the flat parameter buffer (the built-in adamw plugin, as
 * `optimizer: {name: adamw}` runs it, split over the threads as strategy
 * single does), timed over several steps after warm-up (the first step
 * also warms the arenas). Prints tokens/s,
 * the model's achieved GFLOP/s (weft_model_flops_per_token: 6 N per token
 * plus attention), and the sgemm GFLOP/s of the model's main GEMM shape
 * measured in the same run, the yardstick the target is stated against.
 *
 *   bench_gpt [--shape gpt-small-cpu|gpt-tiny|gpt2-124m] [--threads N]
 *             [--steps S] [--warmup W] [--no-yardstick] [--device cpu|cuda[:N]]
 *             [--precision 32-true|bf16-mixed] [--batch B]
 *             [--peak-tflops P] [--optimizer adamw|sgd] [--context T]
 *             [--phases] [--gemm-ceiling] [--weight-copy true|false]
 *
 * --context T trains on sequences of T tokens (1 to the shape's context;
 * default the shape's): the roofline estimate (bench/roofline) runs
 * gpt2-124m at a reduced batch and context under the CUDA emulator. When
 * the process runs under the emulator with EMU_COUNTS set (the emulator
 * exports emu_count_mark), the last timed step is bracketed by the marks
 * "step begin" and "step end" in the counts file, its forward (with the
 * loss) ending at the mark "forward end".
 *
 * AdamW is nanoGPT's (lr 6e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1
 * on the tensors of 2 or more dimensions), the same as bench/gpt/
 * torch_gpt.py. It steps host memory, so on a GPU --optimizer sgd (a plain
 * SGD update, lr 1e-3, on the device) is the default there.
 *
 * --no-yardstick skips the sgemm measurement (ratio 0 in RESULT): for runs
 * under valgrind --tool=callgrind, which count the instructions of the
 * steps alone.
 *
 * gpt-small-cpu: 6 layers, width 384, 6 heads, context 256, batch 4,
 * vocab 256. gpt2-124m: GPT-2 small (12 layers, width 768, 12 heads,
 * context 1024, vocab 50257), batch 8, for a GPU (scripts/gpu-check).
 *
 * --device cuda runs the model on a GPU (no sgemm yardstick there) and
 * reports MFU: the model's FLOPs per second over --peak-tflops (default
 * 989, the dense bf16 peak of an H100 SXM or H200; use the figure of the
 * GPU at hand). --precision bf16-mixed is trainer.precision's autocast
 * (linear layers in bf16 with F32 accumulation, F32 parameters); the
 * figure is printed with the precision it was measured in.
 * --lowp-activations auto|true|false is trainer.lowp_activations: under
 * bf16-mixed the activations and their gradients in bf16 (auto: where
 * the device's kernels offer it, CUDA; true: the CPU's references too);
 * the activations' dtype is printed. --weight-copy true|false is
 * trainer.weight_copy: with 16-bit activations the linear layers read a
 * 16-bit copy of the weights (weft_params_copy_enable), refreshed by one
 * conversion after each optimizer step, instead of rounding each weight
 * in every forward (default true, as the trainer).
 *
 * --phases (a device only) times the three phases of a step apart, in extra
 * steps after the timed ones that wait for the device after each phase:
 * forward with the loss, backward, optimizer (medians, ms). The timed
 * steps themselves never wait inside a step.
 *
 * --gemm-ceiling (a device only) measures the device's 16-bit GEMM
 * ceiling: the kernel table's gemm_lowp (bf16 operands, F32 accumulation
 * and output, cuBLAS on CUDA) at the forward shapes of the model's linear
 * layers for this batch (qkv, attention projection, MLP up and down, the
 * head), several runs of each after a warm-up; the ceiling is their FLOPs
 * over their time, and the model step's achieved FLOP/s is also given as a
 * fraction of it (MFU over what the GEMMs alone reach on this device).
 *
 * The last line is machine-readable: "RESULT key=value ...".
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugin/registry.h"
#include "sgemm_bench.h"
#include "weft/autograd.h"
#include "weft/device.h"
#include "weft/module.h"
#include "weft/ops.h"
#include "weft/optim.h"

typedef struct shape {
	const char *name;
	weft_gpt_config cfg;
	int64_t batch;
} shape;

static const shape shapes[] = {
	{ "gpt-small-cpu", { .n_layer = 6, .n_head = 6, .n_embd = 384, .vocab_size = 256,
			     .block_size = 256, .bias = 1 }, 4 },
	{ "gpt-tiny", { .n_layer = 2, .n_head = 4, .n_embd = 128, .vocab_size = 256,
			.block_size = 64, .bias = 1 }, 4 },
	{ "gpt2-124m", { .n_layer = 12, .n_head = 12, .n_embd = 768, .vocab_size = 50257,
			 .block_size = 1024, .bias = 1 }, 8 },
};

static const char usage[] =
	"usage: bench_gpt [--shape gpt-small-cpu|gpt-tiny|gpt2-124m] [--threads N] [--steps S] "
	"[--warmup W] [--no-yardstick] [--device cpu|cuda[:N]] "
	"[--precision 32-true|bf16-mixed] [--lowp-activations auto|true|false] [--batch B] "
	"[--peak-tflops P] [--optimizer adamw|sgd] [--context T] [--phases] [--gemm-ceiling] "
	"[--weight-copy true|false]\n";

static int fail(const char *what, weft_status st)
{
	fprintf(stderr, "bench_gpt: %s: %s: %s\n", what, weft_status_str(st), weft_error_last());
	return 1;
}

/* CPU seconds this process used (all threads): on a shared machine the
 * 1-thread figure is what a quiet core would take, wall time is not. */
static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The adamw plugin over the whole flat buffer, with its two state slots. */
typedef struct adamw {
	weft_registry *reg;
	weft_config *cfg;
	const weft_optim_ops *ops;
	void *state;
	weft_optim_segment *segs;
	size_t nseg;
	float *params, *grads, *slots[2];
	const weft_optim_step_info *info;
	atomic_int failed;
} adamw;

static weft_status adamw_create(adamw *a, weft_params *ps)
{
	static const char text[] = "{name: adamw, lr: 6.0e-4, betas: [0.9, 0.95], eps: 1.0e-8, "
				   "weight_decay: 0.1}";
	const void *vt;
	weft_tensor *flat, *flat_grad;
	int64_t numel;
	weft_status st;

	weft_params_flat(ps, WEFT_F32, &flat, &flat_grad);
	numel = weft_tensor_numel(flat);
	a->params = flat->data;
	a->grads = flat_grad->data;
	st = weft_registry_create(&a->reg);
	if (!st)
		st = weft_registry_add_default_paths(a->reg);
	if (!st)
		st = weft_registry_find(a->reg, WEFT_PLUGIN_OPTIM, "adamw", &vt, NULL);
	if (!st)
		st = weft_config_load_string("optimizer", text, strlen(text), &a->cfg);
	if (st)
		return st;
	a->ops = vt;
	st = a->ops->create(weft_config_root(a->cfg), &a->state);
	if (st)
		return st;
	if (a->ops->state_slots(a->state) != 2)
		return weft_error_set(WEFT_ERR_INTERNAL, "adamw has %zu state slots, not 2",
				      a->ops->state_slots(a->state));
	a->nseg = weft_params_count(ps);
	a->segs = calloc(a->nseg, sizeof(*a->segs));
	a->slots[0] = calloc((size_t)numel, sizeof(float));
	a->slots[1] = calloc((size_t)numel, sizeof(float));
	if (!a->segs || !a->slots[0] || !a->slots[1])
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory for adamw's state");
	for (size_t i = 0; i < a->nseg; i++) {
		weft_tensor *p = weft_params_at(ps, i);

		a->segs[i] = (weft_optim_segment){
			.name = p->name,
			.offset = (int64_t)((const float *)p->data - a->params),
			.numel = weft_tensor_numel(p),
			.ndim = p->ndim,
			.decay = p->ndim >= 2, /* nanoGPT's rule, the host's default */
		};
	}
	return WEFT_OK;
}

static void adamw_part(void *arg, int64_t begin, int64_t end)
{
	adamw *a = arg;
	float *slots[2] = { a->slots[0] + begin, a->slots[1] + begin };

	if (a->ops->step(a->state, a->segs, a->nseg, a->params + begin, a->grads + begin, slots,
			 begin, end, a->info))
		a->failed = 1;
}

/* The weights' 16-bit copy from the updated weights (one conversion), when
 * the model keeps one. */
static weft_status copy_refresh(weft_model *m, weft_ctx *ctx)
{
	weft_params *ps = weft_model_params(m);

	return weft_params_copy(ps) ? weft_params_copy_refresh(ps, ctx) : WEFT_OK;
}

static weft_status adamw_step(adamw *a, int64_t numel, int64_t step)
{
	weft_optim_step_info info = { .struct_size = sizeof(info), .step = step, .lr = 6e-4,
				      .grad_scale = 1.0 };

	a->info = &info;
	a->failed = 0;
	weft_cpu_parallel_for(numel, (int64_t)1 << 16, adamw_part, a);
	return a->failed ? WEFT_ERR_INTERNAL : WEFT_OK;
}

static void adamw_free(adamw *a)
{
	if (a->ops && a->state)
		a->ops->destroy(a->state);
	free(a->segs);
	free(a->slots[0]);
	free(a->slots[1]);
	weft_config_free(a->cfg);
	weft_registry_free(a->reg);
}

/* The device's 16-bit GEMM ceiling in GFLOP/s (see --gemm-ceiling): each
 * forward linear shape of the model, `runs` times after one warm-up run,
 * waited for; the sum of FLOPs over the sum of seconds. */
static weft_status gemm_ceiling(weft_ctx *ctx, weft_device dev, const weft_gpt_config *c,
				int64_t n_tok, double *out_gflops)
{
	const weft_kernel_table *k = weft_ctx_kernels(ctx);
	void *kc = weft_ctx_kctx(ctx);
	int64_t C = c->n_embd, V = c->vocab_size;
	/* (out features, in features) of qkv, attn proj, fc, mlp proj, head */
	const int64_t sh[5][2] = { { 3 * C, C }, { C, C }, { 4 * C, C }, { C, 4 * C }, { V, C } };
	int64_t max_in = 4 * C, max_out = V > 4 * C ? V : 4 * C;
	size_t xb = (size_t)(n_tok * max_in) * 2, wb = (size_t)(max_out * max_in) * 2;
	size_t yb = (size_t)(n_tok * max_out) * 4;
	void *x = NULL, *w = NULL, *y = NULL;
	double flops = 0.0, secs = 0.0;
	const int runs = 5;
	weft_status st;

	*out_gflops = 0.0;
	if (!WEFT_HAS_MEMBER(k, weft_kernel_table, gemm_lowp_scratch) || !k->gemm_lowp)
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "this device's kernels have no 16-bit "
				      "GEMM (gemm_lowp)");
	if ((st = weft_device_alloc(dev, WEFT_MEM_OTHER, xb, &x)) ||
	    (st = weft_device_alloc(dev, WEFT_MEM_OTHER, wb, &w)) ||
	    (st = weft_device_alloc(dev, WEFT_MEM_OTHER, yb, &y)))
		goto out;
	/* small values: the time of a GEMM does not depend on them */
	if ((st = k->fill(kc, WEFT_BF16, (int64_t)(xb / 2), 0.015625f, x)) ||
	    (st = k->fill(kc, WEFT_BF16, (int64_t)(wb / 2), -0.0078125f, w)))
		goto out;
	for (int s = 0; s < 5 && !st; s++) {
		int64_t m = n_tok, n = sh[s][0], kk = sh[s][1];

		for (int r = -1; r < runs && !st; r++) {
			double t0;

			if ((st = k->synchronize(kc)))
				break;
			t0 = weft_bench_now();
			st = k->gemm_lowp(kc, WEFT_BF16, 0, 1, m, n, kk, 1.0f, x, kk, 0, w, kk, 0,
					  0.0f, y, n, 0, 1, NULL);
			if (!st)
				st = k->synchronize(kc);
			if (!st && r >= 0) {
				secs += weft_bench_now() - t0;
				flops += 2.0 * (double)m * (double)n * (double)kk;
			}
		}
	}
	if (!st && secs > 0)
		*out_gflops = flops / secs / 1e9;
out:
	if (x)
		weft_device_free(dev, WEFT_MEM_OTHER, x, xb);
	if (w)
		weft_device_free(dev, WEFT_MEM_OTHER, w, wb);
	if (y)
		weft_device_free(dev, WEFT_MEM_OTHER, y, yb);
	return st;
}

int main(int argc, char **argv)
{
	const shape *sh = &shapes[0];
	int64_t threads = 0, steps = 5, warmup = 2, batch = 0, context = 0, B, T, n_tok;
	void (*mark)(const char *) = NULL;
	weft_device dev = WEFT_CPU;
	const char *precision = "32-true";
	int lowp = WEFT_LOWP_ACT_AUTO;
	double peak_tflops = 989.0, mfu = 0.0;
	char devname[32];
	weft_model_options mopt = { .seed = 1 };
	weft_ctx_options copt = { .seed = 1 };
	weft_model *m;
	weft_ctx *ctx;
	weft_tensor *ids, *tg, *flat, *flat_grad, *hids = NULL, *htg = NULL;
	int64_t shape2[2];
	double *times, *cpu, t0, c0, median, cpu_med, tok_s, flops, gflops, sgemm;
	double sg_table = 0.0, sg_openblas = 0.0;
	float loss = 0;
	int yardstick = 1, use_adamw = -1, phases = 0, ceiling = 0, weight_copy = 1;
	double ph[3] = { 0 }, *ph_t[3] = { NULL }, ceil_gflops = 0.0;
	adamw opt = { 0 };
	weft_status st;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
			threads = atoll(argv[++i]);
		} else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
			steps = atoll(argv[++i]);
		} else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) {
			warmup = atoll(argv[++i]);
		} else if (!strcmp(argv[i], "--phases")) {
			phases = 1;
		} else if (!strcmp(argv[i], "--gemm-ceiling")) {
			ceiling = 1;
		} else if (!strcmp(argv[i], "--no-yardstick")) {
			yardstick = 0;
		} else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
			batch = atoll(argv[++i]);
		} else if (!strcmp(argv[i], "--context") && i + 1 < argc) {
			context = atoll(argv[++i]);
		} else if (!strcmp(argv[i], "--peak-tflops") && i + 1 < argc) {
			peak_tflops = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--optimizer") && i + 1 < argc) {
			const char *o = argv[++i];

			if (strcmp(o, "adamw") && strcmp(o, "sgd")) {
				fprintf(stderr, "bench_gpt: unknown optimizer '%s' (adamw, sgd)\n", o);
				return 2;
			}
			use_adamw = !strcmp(o, "adamw");
		} else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
			if ((st = weft_device_parse(argv[++i], &dev)))
				return fail("--device", st);
		} else if (!strcmp(argv[i], "--precision") && i + 1 < argc) {
			precision = argv[++i];
			if (strcmp(precision, "32-true") && strcmp(precision, "bf16-mixed")) {
				fprintf(stderr, "bench_gpt: unknown precision '%s' (32-true, "
					"bf16-mixed)\n", precision);
				return 2;
			}
		} else if (!strcmp(argv[i], "--lowp-activations") && i + 1 < argc) {
			const char *v = argv[++i];

			lowp = !strcmp(v, "auto") ? WEFT_LOWP_ACT_AUTO :
			       !strcmp(v, "true") ? WEFT_LOWP_ACT_ON :
			       !strcmp(v, "false") ? WEFT_LOWP_ACT_OFF : -1;
			if (lowp < 0) {
				fprintf(stderr, "bench_gpt: unknown --lowp-activations '%s' (auto, "
					"true, false)\n", v);
				return 2;
			}
		} else if (!strcmp(argv[i], "--weight-copy") && i + 1 < argc) {
			const char *v = argv[++i];

			weight_copy = !strcmp(v, "true") ? 1 : !strcmp(v, "false") ? 0 : -1;
			if (weight_copy < 0) {
				fprintf(stderr, "bench_gpt: unknown --weight-copy '%s' (true, "
					"false)\n", v);
				return 2;
			}
		} else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
			const char *want = argv[++i];

			sh = NULL;
			for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++)
				if (!strcmp(shapes[k].name, want))
					sh = &shapes[k];
			if (!sh) {
				fprintf(stderr, "bench_gpt: unknown shape '%s' (gpt-small-cpu, "
					"gpt-tiny, gpt2-124m)\n", want);
				return 2;
			}
		} else {
			fputs(usage, stderr);
			return 2;
		}
	}
	if (steps < 1)
		steps = 1;
	threads = weft_cpu_threads_resolve(threads, 1);
	weft_cpu_set_threads(threads);
	B = batch > 0 ? batch : sh->batch;
	T = sh->cfg.block_size;
	if (context < 0 || context > T) {
		fprintf(stderr, "bench_gpt: --context %lld: shape %s takes 1 to %lld tokens\n",
			(long long)context, sh->name, (long long)T);
		return 2;
	}
	if (context > 0)
		T = context;
	n_tok = B * T;
	/* the CUDA emulator's counts (EMU_COUNTS), when it is loaded */
	*(void **)&mark = dlsym(RTLD_DEFAULT, "emu_count_mark");
	if (dev.type != WEFT_DEVICE_CPU)
		yardstick = 0; /* the sgemm yardstick is the CPU's */
	if (use_adamw < 0)
		use_adamw = dev.type == WEFT_DEVICE_CPU;
	if ((phases || ceiling) && dev.type == WEFT_DEVICE_CPU) {
		fprintf(stderr, "bench_gpt: --phases and --gemm-ceiling time a device (--device "
			"cuda); on the CPU the sgemm yardstick is the ceiling\n");
		return 2;
	}
	if (use_adamw && dev.type != WEFT_DEVICE_CPU) {
		fprintf(stderr, "bench_gpt: --optimizer adamw steps host memory; on a GPU use "
			"--optimizer sgd\n");
		return 2;
	}

	mopt.device = dev;
	copt.device = dev;
	if ((st = weft_model_create_gpt(&sh->cfg, &mopt, &m)))
		return fail("creating the model", st);
	if ((st = weft_ctx_create(&copt, &ctx)))
		return fail("creating the context", st);
	if (!strcmp(precision, "bf16-mixed") && (st = weft_ctx_set_autocast(ctx, WEFT_BF16)))
		return fail("precision bf16-mixed", st);
	if ((st = weft_ctx_set_lowp_activations(ctx, (weft_lowp_act)lowp)))
		return fail("--lowp-activations", st);
	shape2[0] = B;
	shape2[1] = T;
	if ((st = weft_tensor_alloc("idx", WEFT_I32, 2, shape2, WEFT_CPU, WEFT_MEM_OTHER, &hids)) ||
	    (st = weft_tensor_alloc("targets", WEFT_I32, 2, shape2, WEFT_CPU, WEFT_MEM_OTHER, &htg)))
		return fail("allocating the batch", st);
	for (int64_t i = 0; i < n_tok; i++) {
		((int32_t *)hids->data)[i] = (int32_t)((i * 2654435761u) % (uint64_t)sh->cfg.vocab_size);
		((int32_t *)htg->data)[i] = (int32_t)((i * 40503u + 7) % (uint64_t)sh->cfg.vocab_size);
	}
	ids = hids;
	tg = htg;
	if (dev.type != WEFT_DEVICE_CPU) {
		/* the batch on the device, once: the steps measure the model */
		if ((st = weft_tensor_alloc("idx", WEFT_I32, 2, shape2, dev, WEFT_MEM_OTHER, &ids)) ||
		    (st = weft_tensor_alloc("targets", WEFT_I32, 2, shape2, dev, WEFT_MEM_OTHER, &tg)) ||
		    (st = weft_tensor_copy_from_host(ids, hids->data, (size_t)n_tok * 4)) ||
		    (st = weft_tensor_copy_from_host(tg, htg->data, (size_t)n_tok * 4)))
			return fail("copying the batch to the device", st);
	}
	weft_params_flat(weft_model_params(m), WEFT_F32, &flat, &flat_grad);
	/* the weights' 16-bit copy, as the trainer keeps it (trainer.weight_copy) */
	if (weight_copy && weft_ctx_lowp_activations(ctx) != WEFT_F32 &&
	    ((st = weft_params_copy_enable(weft_model_params(m),
					   weft_ctx_lowp_activations(ctx))) ||
	     (st = weft_ctx_use_params_copy(ctx, weft_model_params(m))) ||
	     (st = copy_refresh(m, ctx))))
		return fail("--weight-copy", st);
	if (use_adamw && (st = adamw_create(&opt, weft_model_params(m))))
		return fail("creating the adamw optimizer", st);
	times = calloc((size_t)steps, sizeof(double));
	cpu = calloc((size_t)steps, sizeof(double));

	for (int64_t s = -warmup; s < steps; s++) {
		weft_model_output o;

		if (mark && s == steps - 1)
			mark("step begin");
		t0 = weft_bench_now();
		c0 = cpu_now();
		weft_ctx_step_begin(ctx);
		if ((st = weft_params_zero_grad(weft_model_params(m))) ||
		    (st = weft_model_loss(m, ctx, &(weft_batch){ .inputs = ids, .targets = tg }, &o)))
			return fail("training step", st);
		if (mark && s == steps - 1)
			mark("forward end");
		if ((st = weft_backward(ctx, o.loss)) ||
		    (st = use_adamw ? adamw_step(&opt, weft_tensor_numel(flat), s + warmup + 1)
				    : weft_ctx_kernels(ctx)->axpy(weft_ctx_kctx(ctx), WEFT_F32,
								  weft_tensor_numel(flat), -1e-3f,
								  flat_grad->data, flat->data)) ||
		    (st = copy_refresh(m, ctx)) ||
		    (st = weft_tensor_copy_to_host(o.loss, &loss, sizeof(loss))))
			return fail("training step", st);
		if (mark && s == steps - 1)
			mark("step end");
		if (s >= 0) {
			times[s] = weft_bench_now() - t0;
			cpu[s] = cpu_now() - c0;
		}
	}
	/* --phases: the same step, waiting for the device after each phase */
	for (int i = 0; phases && i < 3; i++)
		if (!(ph_t[i] = calloc((size_t)steps, sizeof(double))))
			return fail("--phases", WEFT_ERR_NOMEM);
	for (int64_t s = 0; phases && s < steps; s++) {
		const weft_kernel_table *k = weft_ctx_kernels(ctx);
		void *kc = weft_ctx_kctx(ctx);
		weft_model_output o;
		double p0, p1, p2, p3;

		weft_ctx_step_begin(ctx);
		if ((st = k->synchronize(kc)))
			return fail("--phases", st);
		p0 = weft_bench_now();
		if ((st = weft_params_zero_grad(weft_model_params(m))) ||
		    (st = weft_model_loss(m, ctx, &(weft_batch){ .inputs = ids, .targets = tg }, &o)) ||
		    (st = k->synchronize(kc)))
			return fail("--phases: forward", st);
		p1 = weft_bench_now();
		if ((st = weft_backward(ctx, o.loss)) || (st = k->synchronize(kc)))
			return fail("--phases: backward", st);
		p2 = weft_bench_now();
		if ((st = k->axpy(kc, WEFT_F32, weft_tensor_numel(flat), -1e-3f, flat_grad->data,
				  flat->data)) ||
		    (st = copy_refresh(m, ctx)) || (st = k->synchronize(kc)))
			return fail("--phases: optimizer", st);
		p3 = weft_bench_now();
		ph_t[0][s] = p1 - p0;
		ph_t[1][s] = p2 - p1;
		ph_t[2][s] = p3 - p2;
	}
	for (int i = 0; phases && i < 3; i++) {
		qsort(ph_t[i], (size_t)steps, sizeof(double), cmp_double);
		ph[i] = ph_t[i][steps / 2];
		free(ph_t[i]);
	}
	if (ceiling && (st = gemm_ceiling(ctx, dev, &sh->cfg, n_tok, &ceil_gflops)))
		return fail("--gemm-ceiling", st);
	qsort(times, (size_t)steps, sizeof(double), cmp_double);
	qsort(cpu, (size_t)steps, sizeof(double), cmp_double);
	median = times[steps / 2];
	cpu_med = cpu[steps / 2];
	tok_s = (double)n_tok / median;
	flops = weft_model_flops_per_token(m, T) * (double)n_tok;
	gflops = flops / median / 1e9;
	/* the model's main GEMM: mlp.c_fc, (B T) x C times C x 4C */
	sgemm = yardstick ? weft_bench_sgemm_gflops(n_tok, 4 * sh->cfg.n_embd, sh->cfg.n_embd, 2.0,
						    &sg_table, &sg_openblas)
			  : 0.0;
	if (peak_tflops > 0 && dev.type != WEFT_DEVICE_CPU)
		mfu = gflops / (peak_tflops * 1e3);
	weft_device_str(dev, devname, sizeof(devname));

	printf("shape %s: %lld layers, width %lld, %lld heads, context %lld, batch %lld, vocab "
	       "%lld; %lld parameters\n", sh->name, (long long)sh->cfg.n_layer,
	       (long long)sh->cfg.n_embd, (long long)sh->cfg.n_head, (long long)T, (long long)B,
	       (long long)sh->cfg.vocab_size, (long long)weft_model_num_params(m));
	printf("device %s, precision %s, activations %s, weight copy %s, threads %lld, "
	       "optimizer %s, %lld timed steps (median), loss %.4f\n", devname, precision,
	       weft_dtype_name(weft_ctx_lowp_activations(ctx)),
	       weft_params_copy(weft_model_params(m)) ?
		       weft_dtype_name((weft_dtype)weft_params_copy(weft_model_params(m))->dtype) :
		       "none", (long long)threads,
	       use_adamw ? "adamw" : "sgd", (long long)steps, (double)loss);
	printf("step %.1f ms (min %.1f, max %.1f), %.0f tokens/s\n", median * 1e3, times[0] * 1e3,
	       times[steps - 1] * 1e3, tok_s);
	printf("cpu time per step %.1f ms (median; all threads), %.0f tokens per cpu-second\n",
	       cpu_med * 1e3, (double)n_tok / cpu_med);
	printf("model %.2f GFLOP/step, achieved %.1f GFLOP/s; sgemm [%lld x %lld x %lld] %.1f "
	       "GFLOP/s (the faster of weft's gemm %.1f and OpenBLAS %.1f); ratio %.0f%%\n",
	       flops / 1e9, gflops, (long long)n_tok, (long long)(4 * sh->cfg.n_embd),
	       (long long)sh->cfg.n_embd, sgemm, sg_table, sg_openblas,
	       sgemm > 0 ? 100.0 * gflops / sgemm : 0.0);
	if (dev.type != WEFT_DEVICE_CPU)
		printf("MFU %.1f%% (%.1f TFLOP/s achieved, %s, over a %.0f TFLOP/s dense bf16 "
		       "peak; 6 N + 12 L C T FLOPs per token)\n", 100.0 * mfu, gflops / 1e3, precision,
		       peak_tflops);
	if (phases)
		printf("phases (median, waiting for the device after each): forward and loss "
		       "%.2f ms, backward %.2f ms, optimizer (sgd) %.2f ms\n", ph[0] * 1e3,
		       ph[1] * 1e3, ph[2] * 1e3);
	if (ceiling)
		printf("gemm ceiling %.1f TFLOP/s (bf16 gemm_lowp at the model's forward linear "
		       "shapes, batch %lld x %lld); the step reaches %.1f%% of it\n",
		       ceil_gflops / 1e3, (long long)B, (long long)T,
		       ceil_gflops > 0 ? 100.0 * gflops / ceil_gflops : 0.0);
	printf("RESULT impl=weft shape=%s threads=%lld tokens_per_s=%.1f gflops=%.2f "
	       "sgemm_gflops=%.2f sgemm_weft=%.2f sgemm_openblas=%.2f ratio=%.3f step_ms=%.2f min_step_ms=%.2f cpu_ms=%.2f device=%s "
	       "precision=%s batch=%lld mfu=%.4f peak_tflops=%.1f optimizer=%s forward_ms=%.3f "
	       "backward_ms=%.3f optim_ms=%.3f gemm_ceiling_tflops=%.2f mfu_of_ceiling=%.4f\n",
	       sh->name,
	       (long long)threads, tok_s, gflops, sgemm, sg_table, sg_openblas, sgemm > 0 ? gflops / sgemm : 0.0, median * 1e3,
	       times[0] * 1e3, cpu_med * 1e3, devname, precision, (long long)B, mfu, peak_tflops,
	       use_adamw ? "adamw" : "sgd", ph[0] * 1e3, ph[1] * 1e3, ph[2] * 1e3,
	       ceil_gflops / 1e3, ceil_gflops > 0 ? gflops / ceil_gflops : 0.0);
	free(times);
	free(cpu);
	adamw_free(&opt);
	if (ids != hids) {
		weft_tensor_free(ids);
		weft_tensor_free(tg);
	}
	weft_tensor_free(hids);
	weft_tensor_free(htg);
	weft_ctx_free(ctx);
	weft_model_free(m);
	return 0;
}
