/* Greedy `weft generate` equals transformers' greedy `generate` token for
 * token: 50 new tokens after a fixed prompt, for a random-weight GPT-2
 * (tests/fixtures/hf/gpt2_64) and a random-weight Llama (GQA, an untied
 * head, RoPE with Llama 3's scaling; tests/fixtures/hf/llama), each a
 * Hugging Face directory given to the CLI as it is (its config.json builds
 * the model). The ids were recorded by tests/fixtures/hf_generate_ref.py,
 * which also checked that every step's top two logits are at least 1e-3
 * apart, so float32 rounding (~1e-6 on these logits) cannot flip an
 * arg-max: an exact comparison is the right one. The vocabulary is the 256
 * byte values, so the prompt is text and each new token one output byte.
 * With --no-kv-cache the same tokens come out. */
#include <stdint.h>
#include <sys/wait.h>

#include "nn/safetensors.h"
#include "weft_test.h"

static unsigned char out[1 << 14];
static size_t out_len;

static int run(const char *args)
{
	char cmd[4096];
	size_t k;
	FILE *p;
	int status;

	snprintf(cmd, sizeof(cmd), "%s/bin/weft generate %s 2>/dev/null", getenv("WEFT_BUILD_DIR"),
		 args);
	p = popen(cmd, "r");
	WT_REQUIRE(p != NULL);
	out_len = 0;
	while ((k = fread(out + out_len, 1, sizeof(out) - out_len, p)) > 0)
		out_len += k;
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void check(const char *model, const char *fixture, const char *extra)
{
	const char *src = getenv("WEFT_SOURCE_DIR");
	char path[1024], args[2048], prompt[64];
	const weft_st_tensor *p, *g;
	int64_t pi[64], gi[50];
	weft_st_file *f;
	size_t np, ng, same = 0;

	snprintf(path, sizeof(path), "%s/tests/fixtures/hf/%s", src, fixture);
	WT_OK(weft_st_open(path, &f));
	p = weft_st_find(f, "prompt");
	g = weft_st_find(f, "generated");
	WT_REQUIRE(p && g && p->dtype == WEFT_I64 && g->dtype == WEFT_I64);
	np = (size_t)p->shape[0];
	ng = (size_t)g->shape[0];
	WT_REQUIRE(ng == 50 && np < sizeof(prompt));
	/* the file's data is not aligned: copied out */
	memcpy(pi, p->data, np * sizeof(int64_t));
	memcpy(gi, g->data, ng * sizeof(int64_t));
	for (size_t i = 0; i < np; i++) {
		WT_REQUIRE(pi[i] >= 32 && pi[i] < 127 && pi[i] != '\'');
		prompt[i] = (char)pi[i];
	}
	prompt[np] = '\0';
	snprintf(args, sizeof(args), "--ckpt %s/tests/fixtures/hf/%s --prompt '%s' --greedy "
		 "--max-new-tokens 50 %s", src, model, prompt, extra);
	WT_CHECK(run(args) == 0);
	/* the prompt, the 50 bytes, a newline */
	WT_CHECK(out_len == np + ng + 1 && !memcmp(out, prompt, np));
	for (size_t i = 0; i < ng && np + i < out_len; i++)
		same += out[np + i] == (unsigned char)gi[i];
	if (same != ng)
		fprintf(stderr, "%s%s: %zu of %zu tokens equal transformers'\n", model, extra, same,
			ng);
	WT_CHECK(same == ng);
	weft_st_close(f);
}

int main(void)
{
	check("gpt2_64", "gpt2_generate.safetensors", "");
	check("llama", "llama_generate.safetensors", "");
	check("gpt2_64", "gpt2_generate.safetensors", "--no-kv-cache");
	check("llama", "llama_generate.safetensors", "--no-kv-cache");
	return wt_done("test_generate_hf");
}
