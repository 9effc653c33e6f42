/* Generation on CUDA (core/generate, the KV cache of core/nn/gpt_decode.c,
 * `weft generate --accelerator`), against the CPU:
 *   - a small GPT-2 (tests/fixtures/hf/gpt2_64: learned positions, tied
 *     head) and a small Llama (tests/fixtures/hf/llama: RoPE, GQA 4/2),
 *     built on cuda:0 with their weights loaded there, give the same 20
 *     greedy ids as on the CPU, with the KV cache and through the forward
 *     over the window, and the cache ran where it was asked for;
 *   - `weft generate --accelerator cuda` prints the CPU's greedy text and
 *     says it ran on cuda:0, and a config's trainer.accelerator: cuda is
 *     the default when --accelerator is not given.
 * Tolerance: ids must be equal. Both sides compute in F32 (cuBLAS without
 * TF32), so logits differ by ~1e-6 relative; a greedy choice flips only
 * where the top two logits are that close, and the test checks that the
 * CPU's smallest top-1/top-2 gap over the 20 steps of each case is above
 * 1e-4 (so an equal id sequence is a property of the device path, not
 * luck, and a different one is a defect). Skips (77) without a GPU. */
#include <math.h>
#include <sys/wait.h>

#include "cuda_test.h"
#include "generate/generate.h"
#include "weft/autograd.h"
#include "weft/weft.h"

#define NEW_TOKENS 20

static const weft_device cuda0 = { .type = WEFT_DEVICE_CUDA, .index = 0 };

typedef struct gap_probe {
	double min_gap; /* the smallest top-1 minus top-2 logit seen */
} gap_probe;

/* The fixture `name`'s model on dev, from its Hugging Face directory. */
static weft_model *load(const char *name, weft_device dev)
{
	char yaml[4096];
	weft_config *cfg = NULL;
	weft_model *m = NULL;
	weft_model_options mo = { .device = dev, .no_grads = 1 };
	int n = snprintf(yaml, sizeof(yaml),
			 "model: {class: gpt, init_from: '%s/tests/fixtures/hf/%s'}\n",
			 WEFT_SOURCE_DIR_FOR_TESTS, name);

	WT_OK(weft_config_load_string("fixture.yaml", yaml, (size_t)n, &cfg));
	WT_OK(weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"), &mo, &m));
	weft_config_free(cfg);
	return m;
}

/* Greedy ids after a fixed prompt on dev; *kv says whether the cache ran. */
static void greedy(const char *name, weft_device dev, int no_kv_cache, uint32_t *ids, int *kv)
{
	static const uint32_t prompt[] = { 72, 101, 108, 108, 111, 44, 32, 119 };
	weft_model *m = load(name, dev);
	weft_ctx_options co = { .device = dev };
	weft_ctx *ctx = NULL;
	weft_gen_options o = { .max_new_tokens = NEW_TOKENS, .temperature = 0, .top_p = 1,
			       .eos_id = -1, .no_kv_cache = no_kv_cache };
	weft_token_ids out = { 0 };
	weft_gen_stats st;

	o.context = weft_model_gpt_config(m)->block_size;
	WT_OK(weft_ctx_create(&co, &ctx));
	WT_OK(weft_generate(m, ctx, prompt, sizeof(prompt) / sizeof(prompt[0]), &o, &out, &st));
	WT_REQUIRE(out.n == NEW_TOKENS);
	memcpy(ids, out.ids, NEW_TOKENS * sizeof(*ids));
	*kv = st.kv_cache;
	free(out.ids);
	weft_ctx_free(ctx);
	weft_model_free(m);
}

/* The CPU's smallest top-1/top-2 logit gap along its own greedy ids: the
 * forward over the growing sequence, on the host. */
static double min_gap(const char *name, const uint32_t *ids)
{
	static const int32_t prompt[] = { 72, 101, 108, 108, 111, 44, 32, 119 };
	int32_t seq[8 + NEW_TOKENS];
	weft_model *m = load(name, WEFT_CPU);
	weft_ctx_options co = { 0 };
	weft_ctx *ctx = NULL;
	double gap = INFINITY;

	memcpy(seq, prompt, sizeof(prompt));
	for (int i = 0; i < NEW_TOKENS; i++)
		seq[8 + i] = (int32_t)ids[i];
	WT_OK(weft_ctx_create(&co, &ctx));
	weft_ctx_set_grad_enabled(ctx, 0);
	weft_ctx_set_training(ctx, 0);
	for (int k = 0; k < NEW_TOKENS; k++) {
		int64_t shape[2] = { 1, 8 + k };
		weft_tensor x, *logits;
		const float *row;
		float a = -INFINITY, b = -INFINITY;
		int64_t v;

		weft_ctx_step_begin(ctx);
		WT_OK(weft_tensor_init(&x, WEFT_I32, 2, shape, WEFT_CPU, seq));
		WT_OK(weft_model_forward(m, ctx, &x, &logits));
		v = logits->shape[2];
		row = (const float *)logits->data + (shape[1] - 1) * v;
		for (int64_t i = 0; i < v; i++) {
			if (row[i] > a) {
				b = a;
				a = row[i];
			} else if (row[i] > b) {
				b = row[i];
			}
		}
		if (a - b < gap)
			gap = a - b;
	}
	weft_ctx_free(ctx);
	weft_model_free(m);
	return gap;
}

static void compare(const char *name)
{
	uint32_t cpu[NEW_TOKENS], gpu[NEW_TOKENS];
	int kv;

	for (int no_kv = 0; no_kv <= 1; no_kv++) {
		greedy(name, WEFT_CPU, no_kv, cpu, &kv);
		WT_CHECK(kv == !no_kv);
		greedy(name, cuda0, no_kv, gpu, &kv);
		WT_CHECK(kv == !no_kv);
		for (int i = 0; i < NEW_TOKENS; i++)
			if (cpu[i] != gpu[i]) {
				fprintf(stderr, "%s (%s): new id %d is %u on cuda, %u on the cpu\n",
					name, no_kv ? "forward" : "KV cache", i, gpu[i], cpu[i]);
				WT_CHECK(cpu[i] == gpu[i]);
				break;
			}
	}
	{
		double gap = min_gap(name, cpu);

		printf("%s: smallest top-1/top-2 logit gap on the cpu %.3g\n", name, gap);
		WT_CHECK(gap > 1e-4);
	}
}

/* Runs `weft generate ARGS` (stderr with stdout when both), its output
 * (which may hold NUL bytes) into buf, *len bytes; returns the exit code. */
static int cli(const char *args, int both, char *buf, size_t cap, size_t *len)
{
	char cmd[8192];
	size_t n = 0, k;
	FILE *p;
	int status;

	snprintf(cmd, sizeof(cmd), "'%s' generate %s %s", WEFT_CLI, args,
		 both ? "2>&1" : "2>/dev/null");
	p = popen(cmd, "r");
	WT_REQUIRE(p != NULL);
	while (n + 1 < cap && (k = fread(buf + n, 1, cap - 1 - n, p)) > 0)
		n += k;
	buf[n] = '\0';
	*len = n;
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_cli(void)
{
	static char cpu[1 << 14], gpu[1 << 14], cfg_out[1 << 14];
	char args[4096], cfg_path[] = "/tmp/weft_cuda_genXXXXXX";
	const char *common = "--prompt 'Hello, w' --greedy --no-stop --max-new-tokens 20";
	size_t n_cpu, n_gpu, n_cfg;
	int fd = mkstemp(cfg_path);
	FILE *f;

	snprintf(args, sizeof(args), "--ckpt '%s/tests/fixtures/hf/gpt2_64' %s --accelerator cpu",
		 WEFT_SOURCE_DIR_FOR_TESTS, common);
	WT_CHECK(cli(args, 0, cpu, sizeof(cpu), &n_cpu) == 0);
	snprintf(args, sizeof(args), "--ckpt '%s/tests/fixtures/hf/gpt2_64' %s --accelerator cuda",
		 WEFT_SOURCE_DIR_FOR_TESTS, common);
	WT_CHECK(cli(args, 0, gpu, sizeof(gpu), &n_gpu) == 0);
	/* the prompt, 20 bytes (ids below 256 each print one), a newline */
	WT_CHECK(n_cpu == strlen("Hello, w") + NEW_TOKENS + 1);
	WT_CHECK(n_gpu == n_cpu && !memcmp(cpu, gpu, n_cpu));
	WT_CHECK(cli(args, 1, gpu, sizeof(gpu), &n_gpu) == 0);
	WT_CHECK(memmem(gpu, n_gpu, "(KV cache, on cuda:0)", 21) != NULL);
	/* the default: the config's trainer.accelerator */
	WT_REQUIRE(fd >= 0 && (f = fdopen(fd, "w")) != NULL);
	fprintf(f, "model: {class: gpt, init_from: '%s/tests/fixtures/hf/gpt2_64'}\n"
		"trainer: {accelerator: cuda}\n", WEFT_SOURCE_DIR_FOR_TESTS);
	fclose(f);
	snprintf(args, sizeof(args), "--ckpt '%s/tests/fixtures/hf/gpt2_64' --config %s %s "
		 "--no-kv-cache", WEFT_SOURCE_DIR_FOR_TESTS, cfg_path, common);
	WT_CHECK(cli(args, 1, cfg_out, sizeof(cfg_out), &n_cfg) == 0);
	/* the text, then the figures */
	WT_CHECK(n_cfg > n_cpu && !memcmp(cfg_out, cpu, n_cpu));
	WT_CHECK(memmem(cfg_out, n_cfg, "(full forward over the window for each token, on cuda:0)",
			56) != NULL);
	unlink(cfg_path);
}

int main(void)
{
	ct_require_gpu("test_cuda_generate");
	compare("gpt2_64");
	compare("llama");
	test_cli();
	return wt_done("test_cuda_generate");
}
