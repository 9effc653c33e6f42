/* A training step on CUDA makes the host wait for nothing and allocates
 * nothing (issue 25), counted by the CUDA emulator (test_cuda_step_sync_emu;
 * on a real GPU, which cannot count, the test skips).
 *
 * The emulator counts, per process, every host wait (cudaStreamSynchronize,
 * cudaDeviceSynchronize, cudaEventSynchronize, cudaStreamQuery,
 * cudaEventQuery, a synchronous copy to the host, cudaMemcpy, cudaMemset)
 * and every allocation (cudaMalloc, cudaFree, cudaMallocHost, cudaFreeHost),
 * and prints them at exit under EMU_SUMMARY=1 (tests/cuda_emu/README.md).
 * A run's steps cannot be told apart from outside, so the test compares
 * whole runs that differ only in steps that are not logging steps:
 *   - `weft fit` of 5 and of 9 steps with trainer.log_every_n_steps 50:
 *     both log step 1, read the loss of their last step and, once, the
 *     deferred losses of the steps between (core/train/loss_defer.c); the
 *     9-step run has 4 more steps in between. Its host waits and
 *     allocations, summed over its processes, equal the 5-step run's
 *     exactly: a step between logging steps waits for nothing, allocates
 *     nothing. Before the loss stayed on the device, each such step waited
 *     9 times on one device (the loss read, three index checks, the
 *     batch's and the position ids' uploads, the gradients' zeroing):
 *     36 more waits, measured with these counters; ddp over NCCL 11 per
 *     rank (its bucket and loss waits besides), 88 more over 2 ranks.
 *   - 1 step against 9: the same allocations (none after step 1).
 *   - a run that diverges (lr 1e30) with log_every_n_steps 50 stops at the
 *     read at step 9, naming the first step whose loss was not finite.
 * One device (strategy single) and ddp on 2 emulated devices over the
 * emulated NCCL, each rank on its own device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit_table.h"

#define MODEL "class: gpt, n_layer: 1, n_head: 2, n_embd: 16, vocab_size: 256, bias: true"

/* The counts of one run: summed over the summary lines of its log (one
 * per process: the launcher's and each rank's). Returns the number of
 * lines found. */
static int run_counts(const char *dir, const char *run, long *waits, long *allocs)
{
	char path[1200], line[1024];
	int n = 0;
	FILE *f;

	*waits = *allocs = 0;
	snprintf(path, sizeof(path), "%s/%s.log", dir, run);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		const char *a = strstr(line, "), allocations ");
		long w, m;

		if (strncmp(line, "emu: host waits ", 16) || !a ||
		    sscanf(line + 16, "%ld", &w) != 1 || sscanf(a + 15, "%ld", &m) != 1)
			continue;
		*waits += w;
		*allocs += m;
		n++;
	}
	fclose(f);
	return n;
}

/* Runs config `name` for `steps` steps as run `run` with `extra`
 * arguments; its counts. */
static int fit_counts(const char *dir, const char *name, const char *run, int steps,
		      const char *extra, long *waits, long *allocs)
{
	char args[1024];

	snprintf(args, sizeof(args), "--trainer.max_steps=%d --trainer.log_every_n_steps=50 %s",
		 steps, extra);
	WT_CHECK(ct_fit(dir, name, run, "cuda", args) == 0);
	return run_counts(dir, run, waits, allocs);
}

/* The three runs of one configuration: steps between logging steps wait
 * for nothing and allocate nothing; the divergence is found at the read. */
static void test_config(const char *dir, const char *corpus, const ft_row *r, const char *extra)
{
	long w1, a1, w5, a5, w9, a9;
	char run[256], log[1200];
	int procs = r->devices > 1 ? r->devices + 1 : 1;

	WT_REQUIRE(ft_write_config(dir, r->name, corpus, r) == 0);
	snprintf(run, sizeof(run), "%s_1", r->name);
	WT_CHECK(fit_counts(dir, r->name, run, 1, extra, &w1, &a1) == procs);
	snprintf(run, sizeof(run), "%s_5", r->name);
	WT_CHECK(fit_counts(dir, r->name, run, 5, extra, &w5, &a5) == procs);
	snprintf(run, sizeof(run), "%s_9", r->name);
	WT_CHECK(fit_counts(dir, r->name, run, 9, extra, &w9, &a9) == procs);
	fprintf(stderr, "%s: host waits %ld / %ld / %ld, allocations %ld / %ld / %ld "
		"(1 / 5 / 9 steps, all processes)\n", r->name, w1, w5, w9, a1, a5, a9);
	/* exact: the 4 extra steps between logging steps add nothing */
	WT_CHECK(w9 == w5);
	WT_CHECK(a9 == a5 && a5 == a1);

	/* lr 1e30: the parameters overflow after the first update; the loss
	 * is read at step 9 (max_steps) and the failure names the first
	 * step whose loss was not finite and where it was found */
	snprintf(run, sizeof(run), "%s_diverges", r->name);
	{
		char args[1024];

		snprintf(args, sizeof(args), "--trainer.max_steps=9 --trainer.log_every_n_steps=50 "
			 "--optimizer.lr=1e30 %s", extra);
		WT_CHECK(ct_fit(dir, r->name, run, "cuda", args) != 0);
	}
	snprintf(log, sizeof(log), "%s/%s.log", dir, run);
	WT_CHECK(ct_file_has(log, "training diverged"));
	WT_CHECK(ct_file_has(log, "at step 2 (found at step 9: off the logging steps the loss "
			     "is read every trainer.log_every_n_steps = 50 steps)"));
}

int main(void)
{
	static const ft_row single = { .name = "single", .devices = 1, .model = MODEL,
				       .no_clip = 1 };
	static const ft_row ddp = { .name = "ddp_nccl", .devices = 2, .model = MODEL,
				    .no_clip = 1, .strategy = "{name: ddp}" };
	char dir[] = "/tmp/weft_test_cuda_step_sync_XXXXXX", corpus[256], probe[1200];
	long w, a;

	ct_require_gpu("test_cuda_step_sync");
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	setenv("EMU_SUMMARY", "1", 1);
	/* a real GPU has no counters: nothing to measure */
	WT_REQUIRE(ft_write_config(dir, "probe", corpus, &single) == 0);
	WT_CHECK(ct_fit(dir, "probe", "probe", "cuda", "--trainer.max_steps=1") == 0);
	if (run_counts(dir, "probe", &w, &a) == 0) {
		snprintf(probe, sizeof(probe), "rm -rf '%s'", dir);
		if (system(probe) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
		printf("test_cuda_step_sync: skipped: not under the CUDA emulator (its EMU_SUMMARY "
		       "counts are what this test reads)\n");
		return 77;
	}
	test_config(dir, corpus, &single, "");
	/* each rank its own emulated device, as NCCL needs */
	setenv("EMU_DEVICES", "2", 1);
	test_config(dir, corpus, &ddp, "--trainer.comm=nccl");
	ct_finish_dir(dir);
	return wt_done("test_cuda_step_sync");
}
