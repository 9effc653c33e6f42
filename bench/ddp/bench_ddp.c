/* DDP training-step benchmark: N ranks (real processes over gloo, one
 * compute thread each) train a GPT with strategy ddp and AdamW on
 * synthetic tokens; bench/ddp/run puts PyTorch's DDP beside it.
 *
 *   bench_ddp [--shape gpt-mini|gpt-small-cpu] [--ranks N] [--steps S]
 *             [--warmup W] [--bucket-cap-mb X] [--first-bucket-mb Y]
 *             [--comm-hook none|bf16|fp16] [--comm-options YAML]
 *
 * gpt-mini: 4 layers, width 128, 4 heads, context 128, batch 8 per rank;
 * gpt-small-cpu: 6 layers, width 384, 6 heads, context 256, batch 4 per
 * rank; both vocab 256. Reports the median step time over the timed steps
 * (the slowest rank's), global tokens/s, and rank 0's communication: time
 * the comm thread was busy, time the step waited (exposed), their ratio,
 * bytes all-reduced per step. The last line is machine-readable:
 * "RESULT key=value ...". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

typedef struct shape {
	const char *name;
	int64_t n_layer, n_embd, n_head, block, vocab, batch;
} shape;

static const shape shapes[] = {
	{ "gpt-mini", 4, 128, 4, 128, 256, 8 },
	{ "gpt-small-cpu", 6, 384, 6, 256, 256, 4 },
};

typedef struct opts {
	const shape *sh;
	int ranks, steps, warmup;
	double cap, first;
	const char *hook;
	const char *comm_options; /* the gloo backend's options ("{shm: off}") */
} opts;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int parse(int argc, char **argv, opts *o, int *rank_mode, const char **out_path)
{
	*o = (opts){ .sh = &shapes[0], .ranks = 2, .steps = 10, .warmup = 2, .cap = 25.0,
		     .first = 1.0, .hook = "none" };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--rank-out") && v) {
			*rank_mode = 1;
			*out_path = v;
		} else if (!strcmp(a, "--shape") && v) {
			o->sh = NULL;
			for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++)
				if (!strcmp(shapes[k].name, v))
					o->sh = &shapes[k];
			if (!o->sh) {
				fprintf(stderr, "bench_ddp: unknown shape '%s' (gpt-mini, "
					"gpt-small-cpu)\n", v);
				return -1;
			}
		} else if (!strcmp(a, "--ranks") && v) {
			o->ranks = atoi(v);
		} else if (!strcmp(a, "--steps") && v) {
			o->steps = atoi(v);
		} else if (!strcmp(a, "--warmup") && v) {
			o->warmup = atoi(v);
		} else if (!strcmp(a, "--bucket-cap-mb") && v) {
			o->cap = atof(v);
		} else if (!strcmp(a, "--first-bucket-mb") && v) {
			o->first = atof(v);
		} else if (!strcmp(a, "--comm-hook") && v) {
			o->hook = v;
		} else if (!strcmp(a, "--comm-options") && v) {
			o->comm_options = v;
		} else {
			fprintf(stderr, "bench_ddp: unknown or incomplete option '%s'\n", a);
			return -1;
		}
		i++;
	}
	if (o->ranks < 1 || o->ranks > H_MAX_RANKS || o->steps < 1 || o->warmup < 0 ||
	    o->steps + o->warmup > H_MAX_STEPS) {
		fprintf(stderr, "bench_ddp: need 1 <= ranks <= %d, steps >= 1, steps + warmup <= "
			"%d\n", H_MAX_RANKS, H_MAX_STEPS);
		return -1;
	}
	return 0;
}

static int run_rank(const opts *o, const char *out)
{
	char yaml[256];
	h_config c = {
		.strategy = "ddp",
		.strategy_yaml = yaml,
		.model = H_MODEL_GPT,
		.batch = o->sh->batch,
		.n_micro = 1,
		.steps = o->steps + o->warmup,
		.seed = 1,
		.lr = 1e-4,
		.toy_unused_rank = -1,
		.gpt_n_layer = o->sh->n_layer,
		.gpt_n_embd = o->sh->n_embd,
		.gpt_n_head = o->sh->n_head,
		.gpt_block = o->sh->block,
		.gpt_vocab = o->sh->vocab,
		.threads = 1,
		.comm_options = o->comm_options,
	};
	h_result r;
	char path[512];
	weft_status st;

	snprintf(yaml, sizeof(yaml), "{name: ddp, bucket_cap_mb: %g, first_bucket_mb: %g, "
		 "comm_hook: %s}", o->cap, o->first, o->hook);
	st = h_run(&c, &r);
	if (st) {
		fprintf(stderr, "bench_ddp rank: %s: %s\n", weft_status_str(st), weft_error_last());
		return 1;
	}
	snprintf(path, sizeof(path), "%s-rank%d.bin", out, r.rank);
	if (h_result_write(&r, path)) {
		fprintf(stderr, "bench_ddp: cannot write %s\n", path);
		return 1;
	}
	h_result_free(&r);
	return 0;
}

int main(int argc, char **argv)
{
	opts o;
	int rank_mode = 0;
	const char *out = NULL;
	char prefix[128], self[4096], *args[24];
	h_spawn_result sp;
	h_result res[H_MAX_RANKS];
	double med[H_MAX_STEPS], cpu[H_MAX_STEPS], comm = 0, exposed = 0, tok_s, tok_cpu;
	int k = 0, n;
	ssize_t len;

	if (parse(argc, argv, &o, &rank_mode, &out))
		return 2;
	if (rank_mode)
		return run_rank(&o, out);

	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return 1;
	self[len] = '\0';
	snprintf(prefix, sizeof(prefix), "/tmp/bench-ddp-%d", (int)getpid());
	args[k++] = self;
	for (int i = 1; i < argc && k < 20; i++)
		args[k++] = argv[i];
	args[k++] = "--rank-out";
	args[k++] = prefix;
	args[k] = NULL;
	if (h_spawn(o.ranks, args, 3600, &sp))
		return 1;
	for (int r = 0; r < o.ranks; r++) {
		char path[256];

		if (!h_spawn_ok(&sp, r))
			return 1;
		snprintf(path, sizeof(path), "%s-rank%d.bin", prefix, r);
		if (h_result_read(&res[r], path)) {
			fprintf(stderr, "bench_ddp: cannot read %s\n", path);
			return 1;
		}
		unlink(path);
	}
	n = o.steps;
	for (int s = 0; s < n; s++) {
		double worst = 0;

		for (int r = 0; r < o.ranks; r++)
			if (res[r].step_seconds[o.warmup + s] > worst)
				worst = res[r].step_seconds[o.warmup + s];
		med[s] = worst;
		worst = 0;
		for (int r = 0; r < o.ranks; r++)
			if (res[r].step_cpu_seconds[o.warmup + s] > worst)
				worst = res[r].step_cpu_seconds[o.warmup + s];
		cpu[s] = worst;
		comm += (double)res[0].rep[o.warmup + s].comm_ns * 1e-9;
		exposed += (double)res[0].rep[o.warmup + s].exposed_comm_ns * 1e-9;
	}
	qsort(med, (size_t)n, sizeof(double), cmp_double);
	qsort(cpu, (size_t)n, sizeof(double), cmp_double);
	tok_s = (double)res[0].tokens_per_step / med[n / 2];
	/* the machine is shared: throughput if each rank had its core, from
	 * the CPU time its process (compute and comm threads) used per step */
	tok_cpu = (double)res[0].tokens_per_step / cpu[n / 2];
	printf("weft ddp %s: %d ranks x 1 thread, %d timed steps (median of the slowest rank), "
	       "loss %.4f -> %.4f\n", o.sh->name, o.ranks, n, res[0].loss[0],
	       res[0].loss[o.warmup + n - 1]);
	printf("step %.1f ms, %.0f tokens/s; comm busy %.1f ms/step, exposed %.1f ms/step "
	       "(%.0f%% of comm), %lld bytes all-reduced/step (%lld params x 4)\n",
	       med[n / 2] * 1e3, tok_s, comm / n * 1e3, exposed / n * 1e3,
	       comm > 0 ? 100.0 * exposed / comm : 0.0,
	       (long long)(res[0].rep[o.warmup].comm_bytes - res[0].rep[o.warmup].metric_comm_bytes),
	       (long long)res[0].numel);
	printf("fastest step %.1f ms; CPU per step per rank %.1f ms (%.0f tokens per CPU-second "
	       "per rank-core)\n", med[0] * 1e3, cpu[n / 2] * 1e3, tok_cpu);
	printf("RESULT impl=weft shape=%s ranks=%d tokens_per_s=%.1f step_ms=%.2f min_step_ms=%.2f "
	       "cpu_ms=%.2f tokens_per_cpu_s=%.1f comm_ms=%.3f exposed_ms=%.3f exposed_ratio=%.3f\n",
	       o.sh->name, o.ranks, tok_s, med[n / 2] * 1e3, med[0] * 1e3, cpu[n / 2] * 1e3,
	       tok_cpu, comm / n * 1e3, exposed / n * 1e3, comm > 0 ? exposed / comm : 0.0);
	for (int r = 0; r < o.ranks; r++)
		h_result_free(&res[r]);
	return 0;
}
