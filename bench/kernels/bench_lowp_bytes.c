/* The bytes each 16-bit activation member of the CUDA table moves
 * (kernels/cuda/cuda_lowp.cu), as the CUDA emulator counts them (its
 * EMU_COUNTS: each launch's footprint in whole pages, the least DRAM
 * traffic it can have), against the least the member could move: every
 * operand read or written once. Runs only under the emulator:
 *
 *   EMU_COUNTS=/tmp/lowp.counts LD_PRELOAD=build/cuda_emu/lib/libemucuda.so \
 *     WEFT_PLUGIN_PATH=build/cuda_emu/plugins build/bin/bench_lowp_bytes
 *
 * Sizes: GPT-2 124M's rows at 1024 tokens (width 768; the MLP's 3072 for
 * the bias sum), the classifier's loss on 64 rows of 50257 BF16 logits
 * padded to 50304 (forward, backward, and since ABI 1.7 both in one
 * pass: cross_entropy_lowp_fused). Each member runs twice (the first grows the context's
 * scratch); the second is counted, between emu_count_mark's marks. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/kernels.h"
#include "weft/status.h"

enum { TOKENS = 1024, WIDTH = 768, FC = 3072, CE_ROWS = 64, VOCAB = 50257, VOCAB_LD = 50304 };

static const weft_kernel_table *K;
static void *kctx;
static void (*mark)(const char *label);

static void *dev(size_t bytes)
{
	void *p = NULL;

	if (K->mem_alloc(0, WEFT_MEM_OTHER, bytes, &p) || K->zero(kctx, p, bytes)) {
		fprintf(stderr, "bench_lowp_bytes: %s\n", weft_error_last());
		exit(1);
	}
	return p;
}

static void check(weft_status st, const char *what)
{
	if (st) {
		fprintf(stderr, "bench_lowp_bytes: %s: %s\n", what, weft_error_last());
		exit(1);
	}
}

/* The read and written bytes of the launches between "begin NAME" and
 * "end NAME" in the counts file. */
static void counted(const char *path, const char *name, double *rd, double *wr)
{
	char line[512], begin[128], end[128];
	int in = 0;
	FILE *f = fopen(path, "r");

	*rd = *wr = 0.0;
	if (!f)
		return;
	snprintf(begin, sizeof(begin), "M\tbegin %s\n", name);
	snprintf(end, sizeof(end), "M\tend %s\n", name);
	while (fgets(line, sizeof(line), f)) {
		char kind[8], kname[128];
		double r, w;

		if (!strcmp(line, begin))
			in = 1;
		else if (!strcmp(line, end))
			in = 0;
		else if (in && sscanf(line, "%7s %127s %lf %lf", kind, kname, &r, &w) == 4 &&
			 !strcmp(kind, "K")) {
			*rd += r;
			*wr += w;
		}
	}
	fclose(f);
}

int main(void)
{
	const double n = (double)TOKENS * WIDTH, h = 2.0, f = 4.0;
	const double logits = (double)CE_ROWS * VOCAB * h;
	const char *counts = getenv("EMU_COUNTS");
	/* name, least read, least written (bytes) */
	static const char *names[] = { "sum_rows_lowp", "layernorm_lowp_forward",
				       "layernorm_lowp_backward", "cross_entropy_lowp_forward",
				       "cross_entropy_lowp_backward", "cross_entropy_lowp_fused" };
	enum { MEMBERS = sizeof(names) / sizeof(names[0]) };
	double least[MEMBERS][2] = {
		{ (double)TOKENS * FC * h + FC * f, FC * f },
		/* x, r, w, b; sum, y, mean, rstd */
		{ 2 * n * h + 2 * WIDTH * f, 2 * n * h + 2 * TOKENS * f },
		/* s, dy, w, mean, rstd, dw, db; dx, dw, db (dx written: not read) */
		{ 2 * n * h + 3 * WIDTH * f + 2 * TOKENS * f, n * h + 2 * WIDTH * f },
		/* logits, targets; lse, loss, count */
		{ logits + CE_ROWS * 4.0, CE_ROWS * f + 2 * f },
		/* logits, targets, lse, dloss, count; the gradient over the logits */
		{ logits + CE_ROWS * 4.0 + CE_ROWS * f + 2 * f, logits },
		/* logits, targets; the gradient over the logits, lse, loss, count */
		{ logits + CE_ROWS * 4.0, logits + CE_ROWS * f + 2 * f },
	};
	void *x, *r, *sum, *y, *dy, *dx, *z, *tg;
	float *w, *b, *mean, *rstd, *dw, *db, *fc, *lse, *sc;

	*(void **)&mark = dlsym(RTLD_DEFAULT, "emu_count_mark");
	if (!mark || !counts) {
		fprintf(stderr, "bench_lowp_bytes: run it under the CUDA emulator with EMU_COUNTS "
			"set (see the top of bench/kernels/bench_lowp_bytes.c)\n");
		return 2;
	}
	check(weft_kernels_get((weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 }, &K),
	      "the CUDA kernels");
	check(K->ctx_create(0, &kctx), "a context");
	x = dev((size_t)TOKENS * FC * 2);
	r = dev((size_t)n * 2);
	sum = dev((size_t)n * 2);
	y = dev((size_t)n * 2);
	dy = dev((size_t)n * 2);
	dx = dev((size_t)n * 2);
	z = dev((size_t)CE_ROWS * VOCAB_LD * 2);
	tg = dev((size_t)CE_ROWS * 4);
	w = dev(WIDTH * 4);
	b = dev(WIDTH * 4);
	mean = dev(TOKENS * 4);
	rstd = dev(TOKENS * 4);
	dw = dev(WIDTH * 4);
	db = dev(WIDTH * 4);
	fc = dev(FC * 4);
	lse = dev(CE_ROWS * 4);
	sc = dev(4 * 4);
	check(K->fill(kctx, WEFT_F32, WIDTH, 1.0f, w), "fill");
	check(K->fill(kctx, WEFT_F32, 2, 1.0f, sc + 2), "fill");
	for (int round = 0; round < 2; round++) {
		char label[160];

		for (int i = 0; i < MEMBERS; i++) {
			snprintf(label, sizeof(label), "begin %s", names[i]);
			if (round)
				mark(label);
			switch (i) {
			case 0:
				check(K->sum_rows_lowp(kctx, WEFT_BF16, TOKENS, FC, x, fc), names[i]);
				break;
			case 1:
				check(K->layernorm_lowp_forward(kctx, WEFT_BF16, TOKENS, WIDTH, 1e-5f, x,
								r, sum, w, b, y, mean, rstd),
				      names[i]);
				break;
			case 2:
				check(K->layernorm_lowp_backward(kctx, WEFT_BF16, TOKENS, WIDTH, sum, w,
								 mean, rstd, dy, dx, 1, dw, db),
				      names[i]);
				break;
			case 3:
				check(K->cross_entropy_lowp_forward(kctx, WEFT_BF16, CE_ROWS, VOCAB,
								    VOCAB_LD, z, WEFT_I32, tg, -100,
								    lse, sc, sc + 1),
				      names[i]);
				break;
			case 4:
				check(K->cross_entropy_lowp_backward(kctx, WEFT_BF16, CE_ROWS, VOCAB,
								     VOCAB_LD, z, WEFT_I32, tg, -100,
								     lse, sc + 2, sc + 3, z),
				      names[i]);
				break;
			default: /* ABI 1.7: the forward and the gradient in one pass */
				check(K->cross_entropy_lowp_fused(kctx, WEFT_BF16, CE_ROWS, VOCAB,
								  VOCAB_LD, z, WEFT_I32, tg, -100,
								  1.0f, lse, sc, sc + 1),
				      names[i]);
			}
			snprintf(label, sizeof(label), "end %s", names[i]);
			if (round)
				mark(label);
		}
	}
	check(K->synchronize(kctx), "synchronize");
	printf("%-28s %12s %12s %12s %12s %8s\n", "member (bf16)", "least read", "least wrote",
	       "counted read", "counted wrote", "ratio");
	for (int i = 0; i < MEMBERS; i++) {
		double rd, wr;

		counted(counts, names[i], &rd, &wr);
		printf("%-28s %12.0f %12.0f %12.0f %12.0f %8.3f\n", names[i], least[i][0],
		       least[i][1], rd, wr, (rd + wr) / (least[i][0] + least[i][1]));
	}
	K->ctx_destroy(kctx);
	return 0;
}
