/* bench_roofline - an estimated GPU step time and MFU from the CUDA
 * emulator's counts (tests/cuda_emu, EMU_COUNTS): bench/roofline/run runs
 * one GPT training step (bench_gpt) under the emulator at three reduced
 * sizes and hands the counts files here.
 *
 *   bench_roofline --run B T FILE --run B T FILE --run B T FILE
 *                  --batch B --context T --layers L --width C --heads H
 *                  --params N [--gpu h100|h200] [--launch-us U] [--e-mma E]
 *
 * Scaling. Each operation (kernel name, or GEMM by transposition and
 * types) is summed over the step (between the marks "step begin" and
 * "step end"); its launches, bytes read, bytes written and FLOPs are each
 * fitted exactly through the three runs as a + b (B T) + c (B T^2): a the
 * part that does not grow with the batch (weights, optimizer), b the
 * activations, c the T x T attention terms. The three runs must differ in
 * both B T and B T^2 (bench/roofline/run uses (B0, T0), (B0, 2 T0),
 * (B0, 4 T0): one batch size, so a term that grows with T alone (the
 * position embedding's rows, their gradient) is fitted exactly as a B T
 * term and over-counted B-fold at the target, a few MB; runs at two batch
 * sizes cannot fit such a term at all and threw the step's memsets, the
 * embedding's add and gathers off by hundreds of MB). The same runs
 * cannot see a term that grows with B alone: it would be fitted into the
 * constant and under-counted B-fold; weft's step has none (what does not
 * scale with T is the weights' and optimizer's, per step). The table's "scales" column names the terms that make up
 * more than 5% of the value at the target size. Launches are not fitted:
 * each operation's largest count of the three runs (only the embedding
 * gradient's sort adds launches with the size: one up to 2048 tokens, as
 * the reduced runs have, 10 at 16384, so its launches are under-counted). The fit extrapolates page-granular
 * counts 256 times: a term that is noise at the reduced sizes (a page
 * more or less) can show as B T^2 in the "scales" column.
 *
 * FLOPs. GEMM FLOPs come from the cuBLAS stand-in (2 m n k). A kernel's
 * scalar arithmetic is not seen, but its tensor-core products are: the
 * emulated mma.sync m16n8k16 (cuda_mma.cuh) counts 2 x 16 x 8 x 16 FLOPs
 * (wmma::mma_sync 2 x 16^3) of class tc16 per warp and call on the
 * kernel's line (the tensor-core flash attention of
 * kernels/cuda/cuda_flash_mma_fwd.cu and cuda_flash_mma_bwd.cu: every tile
 * product it issues, the masked parts of diagonal tiles and padding rows
 * included), fitted like the bytes. The scalar flash attention kernels' FLOPs come from
 * their loops (causal, a query row t visits keys 0..t: T^2/2 dot products
 * of head size hs per matrix product and head, 2 FLOPs each):
 * k_flash_fwd 2 products (q k, p v), k_flash_bwd_dkdv 4 (s, dp, dv, dk),
 * k_flash_bwd_dq 3 (s, dp, dq), each B H hs T^2 FLOPs per launch (a layer),
 * on the CUDA cores.
 * Other kernels' FLOPs are a few per byte and left out (memory bound).
 *
 * The time model, per operation, from the data sheets (SXM parts):
 *   H100: 3.35 TB/s HBM3; H200: 4.8 TB/s HBM3e; both dense bf16/fp16
 *   tensor cores 989.4 TFLOP/s, TF32 494.7, FP32 CUDA cores 66.9;
 *   PCIe Gen5 x16 64 GB/s for host copies.
 *   time = max(bytes / (bandwidth x e_mem), FLOPs / (peak x e_class))
 *          + launches x launch overhead
 * with stated efficiencies: e_mem 0.75 (a streaming kernel reaches 75-90%
 * of HBM bandwidth; weft's kernels use scalar loads), tensor-core and TF32
 * GEMMs 0.70 (cuBLAS at GPT-2 124M's shapes), FP32 GEMMs 0.75, the scalar
 * flash kernels 0.25 of the FP32 peak (a thread a query row, scalar FMAs,
 * no tensor cores: each FMA takes its K or V element from shared memory,
 * a broadcast load per warp, and an SM issues a quarter as many shared
 * loads as FMAs), kernels with counted tensor-core FLOPs (the flash
 * attention on mma.sync, kernels/cuda/cuda_flash_mma_*.cu) E_MMA = 0.20 of
 * the dense bf16 peak (--e-mma E overrides it; bench/roofline/run prints
 * the estimate at 0.10, 0.15, 0.20 and 0.25 beside the table). Why 0.20:
 * the published figures on an H100 SXM5 for kernels of the same structure
 * (FlashAttention-2: four warps of 16 query rows, the score tile and the
 * online softmax in registers, ldmatrix-fed m16n8k16 products) at head
 * size 64 and sequence 1k in bf16, without the causal mask, are 306 TFLOP/s
 * forward (31% of the peak) and 238 backward (24%) (the FlashAttention-3
 * paper's comparison); weft's kernels share that structure but are causal
 * (the diagonal tiles' masked parts counted as issued), split the
 * backward in two deterministic kernels that recompute S and dP, and have
 * not been tuned on a GPU, so two thirds of the forward's figure and five
 * sixths of the backward's, 0.20; the WMMA kernels they replace (softmax
 * through shared memory) were taken at 0.10. An assumption until
 * scripts/gpu-check part 9 measures them. Host copies 0.80 of the
 * link; a launch costs U us
 * (default 3: back-to-back launches on one stream without graphs). The
 * bytes are the emulator's unique page footprints: a lower bound of DRAM
 * traffic. Host synchronizations inside the step are not modeled (their
 * copies are). MFU = (6 N + 12 L C T) FLOPs per token x B T over the step
 * time and the 989.4 TFLOP/s dense bf16 peak, as bench_gpt and
 * scripts/gpu-check count it.
 *
 * Prints the per-operation table and a last line "RESULT gpu=... step_ms=...
 * mfu=... tokens_per_s=..." per GPU. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPS 512
#define NRUNS 3

typedef struct gpu {
	const char *name;
	double hbm, tc16, tf32, fp32, pcie; /* bytes/s, FLOP/s */
} gpu;

static const gpu gpus[] = {
	{ "H100", 3.35e12, 989.4e12, 494.7e12, 66.9e12, 64e9 },
	{ "H200", 4.8e12, 989.4e12, 494.7e12, 66.9e12, 64e9 },
};

#define E_MEM 0.75
#define E_TC 0.70
#define E_FP32_GEMM 0.75
#define E_SIMT 0.25
#define E_MMA 0.20 /* default of --e-mma */
#define E_LINK 0.80

enum { Q_LAUNCH, Q_READ, Q_WRITE, Q_FLOPS, NQ };

typedef struct op {
	char name[128];
	char kind;
	char cls[16];
	double q[NRUNS][NQ];  /* per run */
	double coef[NQ][3];   /* a, b, c of a + b BT + c BT^2 */
	double at[NQ];        /* at the target size */
	double share_terms[3];
	double time[2];       /* per gpu, seconds */
	const char *bound[2];
} op;

static op ops[MAX_OPS];
static int nops;

static int fail(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "bench_roofline: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	return 2;
}

static op *find_op(const char *name, char kind, const char *cls)
{
	for (int i = 0; i < nops; i++)
		if (!strcmp(ops[i].name, name) && ops[i].kind == kind)
			return &ops[i];
	if (nops == MAX_OPS)
		return NULL;
	op *o = &ops[nops++];
	snprintf(o->name, sizeof(o->name), "%s", name);
	snprintf(o->cls, sizeof(o->cls), "%s", cls);
	o->kind = kind;
	return o;
}

/* Adds the records of one counts file's marked step to run r. */
static int read_run(const char *path, int r)
{
	FILE *f = fopen(path, "r");
	char line[512], name[128], cls[16], kind;
	double rd, wr, fl;
	int in_step = 0, seen_end = 0, lineno = 0;

	if (!f)
		return fail("%s: %s (the counts file of bench/roofline/run)", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (line[0] == 'M') {
			if (strstr(line, "step begin"))
				in_step = 1;
			else if (strstr(line, "step end") && in_step) {
				in_step = 0;
				seen_end = 1;
			}
			continue;
		}
		if (!in_step)
			continue;
		if (sscanf(line, "%c\t%127[^\t]\t%lf\t%lf\t%lf\t%15s", &kind, name, &rd, &wr, &fl,
			   cls) != 6) {
			fclose(f);
			fprintf(stderr, "bench_roofline: %s:%d: not a counts line (kind, name, bytes "
				"read, bytes written, FLOPs, class)\n", path, lineno);
			return 2;
		}
		op *o = find_op(name, kind, cls);
		if (!o) {
			fclose(f);
			return fail("%s: more than %s distinct operations", path, "512");
		}
		o->q[r][Q_LAUNCH] += 1;
		o->q[r][Q_READ] += rd;
		o->q[r][Q_WRITE] += wr;
		o->q[r][Q_FLOPS] += fl;
	}
	fclose(f);
	if (!seen_end)
		return fail("%s: no step between the marks \"step begin\" and \"step end\" (run "
			    "bench_gpt under the emulator with EMU_COUNTS set)%s", path, "");
	return 0;
}

/* Solves the 3x3 system m x = y (Cramer); 0 when singular. */
static int solve3(double m[3][3], const double y[3], double x[3])
{
	double d = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
		   m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
		   m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);

	if (fabs(d) < 1e-300)
		return 0;
	for (int c = 0; c < 3; c++) {
		double t[3][3];

		memcpy(t, m, sizeof(t));
		for (int r = 0; r < 3; r++)
			t[r][c] = y[r];
		x[c] = (t[0][0] * (t[1][1] * t[2][2] - t[1][2] * t[2][1]) -
			t[0][1] * (t[1][0] * t[2][2] - t[1][2] * t[2][0]) +
			t[0][2] * (t[1][0] * t[2][1] - t[1][1] * t[2][0])) / d;
	}
	return 1;
}

/* The FLOPs of the flash kernels per B H hs T^2 (see the header). */
static double flash_products(const char *name)
{
	if (strstr(name, "k_flash_fwd"))
		return 2.0;
	if (strstr(name, "k_flash_bwd_dkdv"))
		return 4.0;
	if (strstr(name, "k_flash_bwd_dq"))
		return 3.0;
	return 0.0;
}

static void fmt_bytes(double b, char *out, size_t n)
{
	if (b >= 1e9)
		snprintf(out, n, "%.2f GB", b / 1e9);
	else if (b >= 1e6)
		snprintf(out, n, "%.1f MB", b / 1e6);
	else
		snprintf(out, n, "%.0f kB", b / 1e3);
}

static int cmp_time(const void *a, const void *b)
{
	double x = ((const op *)a)->time[0], y = ((const op *)b)->time[0];

	return x > y ? -1 : x < y;
}

int main(int argc, char **argv)
{
	const char *files[NRUNS];
	double rb[NRUNS], rt[NRUNS], B = 0, T = 0, L = 0, C = 0, H = 0, N = 0, launch_us = 3.0,
	       e_mma = E_MMA;
	int nruns = 0, only = -1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--run") && i + 3 < argc) {
			if (nruns == NRUNS)
				return fail("%s: exactly three --run (B T FILE) are needed%s", argv[i],
					    "");
			rb[nruns] = atof(argv[i + 1]);
			rt[nruns] = atof(argv[i + 2]);
			files[nruns++] = argv[i + 3];
			i += 3;
		} else if (i + 1 < argc && !strcmp(argv[i], "--batch")) {
			B = atof(argv[++i]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--context")) {
			T = atof(argv[++i]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--layers")) {
			L = atof(argv[++i]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--width")) {
			C = atof(argv[++i]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--heads")) {
			H = atof(argv[++i]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--params")) {
			N = atof(argv[++i]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--launch-us")) {
			launch_us = atof(argv[++i]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--e-mma")) {
			e_mma = atof(argv[++i]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--gpu")) {
			i++;
			only = !strcmp(argv[i], "h100") ? 0 : !strcmp(argv[i], "h200") ? 1 : -2;
			if (only == -2)
				return fail("--gpu %s: expected h100 or h200%s", argv[i], "");
		} else {
			fprintf(stderr, "usage: bench_roofline --run B T FILE (three times) --batch B "
				"--context T --layers L --width C --heads H --params N [--gpu "
				"h100|h200] [--launch-us U] [--e-mma E]\n");
			return 2;
		}
	}
	if (nruns != NRUNS || B <= 0 || T <= 0 || L <= 0 || C <= 0 || H <= 0 || N <= 0 ||
	    launch_us < 0 || !(e_mma > 0 && e_mma <= 1))
		return fail("needs three --run B T FILE, positive --batch, --context, --layers, "
			    "--width, --heads and --params%s%s", ", and --e-mma in (0, 1]", "");
	for (int r = 0; r < NRUNS; r++) {
		int st = read_run(files[r], r);

		if (st)
			return st;
	}
	double m[3][3], target[3] = { 1.0, B * T, B * T * T };
	for (int r = 0; r < NRUNS; r++) {
		m[r][0] = 1.0;
		m[r][1] = rb[r] * rt[r];
		m[r][2] = rb[r] * rt[r] * rt[r];
	}
	double hs = C / H;
	double tot_rd = 0, tot_wr = 0, tot_fl = 0, tot_launch = 0, tot_time[2] = { 0, 0 };

	for (int i = 0; i < nops; i++) {
		op *o = &ops[i];

		for (int q = 0; q < NQ; q++) {
			double y[3] = { o->q[0][q], o->q[1][q], o->q[2][q] }, v = 0;

			if (!solve3(m, y, o->coef[q]))
				return fail("the three runs do not separate B T from B T^2: use "
					    "(B0, T0), (B0, 2 T0), (B0, 4 T0)%s%s", "", "");
			for (int k = 0; k < 3; k++)
				v += o->coef[q][k] * target[k];
			o->at[q] = v > 0 ? v : 0;
		}
		/* launches: the largest count of the runs (they grow at most as
		 * log^2 of the size, the embedding gradient's sort steps, which a
		 * polynomial in B T would overshoot) */
		o->at[Q_LAUNCH] = 0;
		for (int r = 0; r < NRUNS; r++)
			o->at[Q_LAUNCH] = fmax(o->at[Q_LAUNCH], o->q[r][Q_LAUNCH]);
		/* the scalar flash kernels (the tensor-core ones count their own) */
		int scalar_flash = flash_products(o->name) > 0 && strcmp(o->cls, "tc16");
		if (scalar_flash) {
			o->at[Q_FLOPS] = flash_products(o->name) * B * H * hs * T * T * o->at[Q_LAUNCH];
			snprintf(o->cls, sizeof(o->cls), "simt");
		}
		/* which terms make the bytes (FLOPs where there are no bytes) */
		int q = o->at[Q_READ] + o->at[Q_WRITE] > 0 ? Q_READ : Q_FLOPS;
		double parts[3], sum = 0;
		for (int k = 0; k < 3; k++) {
			parts[k] = fabs(o->coef[q][k] * target[k]);
			if (q == Q_READ)
				parts[k] += fabs(o->coef[Q_WRITE][k] * target[k]);
			sum += parts[k];
		}
		for (int k = 0; k < 3; k++)
			o->share_terms[k] = sum > 0 ? parts[k] / sum : 0;
		if (scalar_flash)
			o->share_terms[2] = 1.0; /* the FLOPs grow as B T^2 */
		for (int g = 0; g < 2; g++) {
			const gpu *G = &gpus[g];
			double bytes = o->at[Q_READ] + o->at[Q_WRITE], tm, tc = 0, tl;

			if (!strcmp(o->cls, "h2d") || !strcmp(o->cls, "d2h"))
				tm = bytes / (G->pcie * E_LINK);
			else
				tm = bytes / (G->hbm * E_MEM);
			if (!strcmp(o->cls, "tc16"))
				tc = o->at[Q_FLOPS] / (G->tc16 * (o->kind == 'K' ? e_mma : E_TC));
			else if (!strcmp(o->cls, "tf32"))
				tc = o->at[Q_FLOPS] / (G->tf32 * E_TC);
			else if (!strcmp(o->cls, "fp32"))
				tc = o->at[Q_FLOPS] / (G->fp32 * E_FP32_GEMM);
			else if (!strcmp(o->cls, "simt"))
				tc = o->at[Q_FLOPS] / (G->fp32 * E_SIMT);
			tl = o->at[Q_LAUNCH] * launch_us * 1e-6;
			o->time[g] = (tm > tc ? tm : tc) + tl;
			o->bound[g] = tl > tm && tl > tc ? "launch" :
				      tc > tm ? "compute" :
				      (!strcmp(o->cls, "h2d") || !strcmp(o->cls, "d2h")) ? "pcie" :
											    "memory";
			tot_time[g] += o->time[g];
		}
		tot_rd += o->at[Q_READ];
		tot_wr += o->at[Q_WRITE];
		tot_fl += o->at[Q_FLOPS];
		tot_launch += o->at[Q_LAUNCH];
	}
	qsort(ops, (size_t)nops, sizeof(ops[0]), cmp_time);

	double model_flops = (6.0 * N + 12.0 * L * C * T) * B * T;
	char b1[32];

	printf("roofline estimate: one training step at batch %.0f, context %.0f (%.0f layers, "
	       "width %.0f, %.0f heads, %.0f parameters), from the emulator's counts at (B, T) = "
	       "(%.0f, %.0f), (%.0f, %.0f), (%.0f, %.0f); launch overhead %.1f us; tensor-core "
	       "kernels at %.2f of the peak\n", B, T, L, C, H, N, rb[0], rt[0], rb[1], rt[1], rb[2],
	       rt[2], launch_us, e_mma);
	printf("%-44s %8s %10s %10s %9s %5s %-9s %-8s %9s %6s %9s %6s\n", "operation", "launches",
	       "read", "written", "GFLOP", "class", "scales", "bound", "H100 ms", "share",
	       "H200 ms", "share");
	for (int i = 0; i < nops; i++) {
		op *o = &ops[i];
		char rd[32], wr[32], sc[32] = "";
		static const char *const term[3] = { "1", "BT", "BT^2" };

		if (o->at[Q_LAUNCH] == 0 && o->time[0] == 0)
			continue;
		for (int k = 0; k < 3; k++)
			if (o->share_terms[k] > 0.05)
				snprintf(sc + strlen(sc), sizeof(sc) - strlen(sc), "%s%s",
					 sc[0] ? "+" : "", term[k]);
		fmt_bytes(o->at[Q_READ], rd, sizeof(rd));
		fmt_bytes(o->at[Q_WRITE], wr, sizeof(wr));
		printf("%-44.44s %8.0f %10s %10s %9.1f %5s %-9s %-8s %9.3f %5.1f%% %9.3f %5.1f%%\n",
		       o->name, o->at[Q_LAUNCH], rd, wr, o->at[Q_FLOPS] / 1e9, o->cls,
		       sc[0] ? sc : "-", o->bound[0], o->time[0] * 1e3,
		       100.0 * o->time[0] / tot_time[0], o->time[1] * 1e3,
		       100.0 * o->time[1] / tot_time[1]);
	}
	fmt_bytes(tot_rd + tot_wr, b1, sizeof(b1));
	printf("total: %.0f launches, %s moved, %.1f GFLOP counted (model: %.1f GFLOP, 6 N + "
	       "12 L C T per token)\n", tot_launch, b1, tot_fl / 1e9, model_flops / 1e9);
	for (int g = 0; g < 2; g++) {
		double mfu = model_flops / tot_time[g] / gpus[g].tc16;

		if (only >= 0 && g != only)
			continue;
		printf("%s: estimated step %.2f ms, %.0f tokens/s, MFU %.1f%% (of %.1f TFLOP/s "
		       "dense bf16)\n", gpus[g].name, tot_time[g] * 1e3, B * T / tot_time[g],
		       100.0 * mfu, gpus[g].tc16 / 1e12);
	}
	for (int g = 0; g < 2; g++) {
		if (only >= 0 && g != only)
			continue;
		printf("RESULT gpu=%s step_ms=%.3f tokens_per_s=%.0f mfu=%.4f batch=%.0f context=%.0f\n",
		       gpus[g].name, tot_time[g] * 1e3, B * T / tot_time[g],
		       model_flops / tot_time[g] / gpus[g].tc16, B, T);
	}
	return 0;
}
