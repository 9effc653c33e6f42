/* `weft generate`: from a checkpoint directory of a run (its config.yaml
 * found two levels up), greedy output is the prompt followed by exactly the
 * bytes weft_generate picks in process for the same weights; a seed repeats
 * its sample; --no-kv-cache gives the same greedy text; a BPE model goes
 * through --tokenizer; tokens/s is printed, saying whether the KV cache ran
 * and on which device;
 * each user error is one clear message. */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "generate/generate.h"
#include "weft/autograd.h"
#include "weft/weft.h"
#include "weft_test.h"

static char dir[] = "/tmp/weft_gencliXXXXXX";
static char out_buf[1 << 16];
static size_t out_len;
static const char *out = out_buf;

static int run(const char *args, int with_stderr)
{
	char cmd[4096];
	size_t k;
	FILE *p;
	int status;

	snprintf(cmd, sizeof(cmd), "%s/bin/weft generate %s %s", getenv("WEFT_BUILD_DIR"), args,
		 with_stderr ? "2>&1" : "2>/dev/null");
	p = popen(cmd, "r");
	WT_REQUIRE(p != NULL);
	out_len = 0;
	while ((k = fread(out_buf + out_len, 1, sizeof(out_buf) - 1 - out_len, p)) > 0)
		out_len += k;
	out_buf[out_len] = '\0';
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Whether the output (which may hold NUL bytes) contains `s`. */
static int has(const char *s)
{
	return memmem(out_buf, out_len, s, strlen(s)) != NULL;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	WT_REQUIRE(f);
	fputs(text, f);
	fclose(f);
}

/* A run directory as weft fit leaves it, with random weights. */
static weft_model *make_run(int64_t vocab, const char *name, char *ckpt, size_t cap)
{
	weft_gpt_config c = { .n_layer = 2, .n_head = 2, .n_embd = 16, .vocab_size = vocab,
			      .block_size = 16, .bias = 1 };
	weft_model_options mo = { .seed = 11, .no_grads = 1 };
	char path[1024], yaml[512];
	weft_model *m;

	snprintf(path, sizeof(path), "mkdir -p %s/%s/version_0/checkpoints/last", dir, name);
	WT_REQUIRE(system(path) == 0);
	snprintf(path, sizeof(path), "%s/%s/version_0/config.yaml", dir, name);
	snprintf(yaml, sizeof(yaml), "model: {class: gpt, n_layer: 2, n_head: 2, n_embd: 16, "
		 "vocab_size: %lld, block_size: 16, bias: true}\n", (long long)vocab);
	write_file(path, yaml);
	WT_OK(weft_model_create_gpt(&c, &mo, &m));
	snprintf(ckpt, cap, "%s/%s/version_0/checkpoints/last", dir, name);
	snprintf(path, sizeof(path), "%s/model.safetensors", ckpt);
	WT_OK(weft_model_save_safetensors(m, path));
	return m;
}

int main(void)
{
	char ckpt[1024], args[2048], first[1 << 12], cmd[600];
	size_t first_len;
	weft_model *m;
	weft_ctx *ctx;
	weft_ctx_options co = { 0 };
	weft_gen_options o = { .max_new_tokens = 40, .context = 16, .temperature = 0, .top_p = 1,
			       .eos_id = -1 };
	weft_gen_stats st;
	weft_token_ids ids = { 0 };
	const uint32_t prompt[3] = { 'H', 'i', ' ' };

	WT_REQUIRE(mkdtemp(dir));
	m = make_run(256, "bytes", ckpt, sizeof(ckpt));

	/* greedy: the prompt, then weft_generate's bytes, then a newline */
	snprintf(args, sizeof(args), "--ckpt %s --prompt 'Hi ' --greedy --max-new-tokens 40", ckpt);
	WT_CHECK(run(args, 0) == 0);
	WT_OK(weft_ctx_create(&co, &ctx));
	WT_OK(weft_generate(m, ctx, prompt, 3, &o, &ids, &st));
	WT_CHECK(ids.n == 40);
	WT_CHECK(out_len == 3 + 40 + 1 && !memcmp(out, "Hi ", 3));
	for (size_t i = 0; i < ids.n && out_len == 44; i++)
		WT_CHECK((uint8_t)out_buf[3 + i] == ids.ids[i]);
	memcpy(first, out_buf, out_len);
	first_len = out_len;
	WT_CHECK(run(args, 0) == 0);
	WT_CHECK(out_len == first_len && !memcmp(out, first, first_len));
	/* top-k 1 at a high temperature is greedy too */
	snprintf(args, sizeof(args), "--ckpt %s --prompt 'Hi ' --top-k 1 --temperature 3 "
		 "--max-new-tokens 40", ckpt);
	WT_CHECK(run(args, 0) == 0);
	WT_CHECK(out_len == first_len && !memcmp(out, first, first_len));
	/* without the KV cache: the same text, and stderr says which path ran */
	snprintf(args, sizeof(args), "--ckpt %s --prompt 'Hi ' --greedy --no-kv-cache "
		 "--max-new-tokens 40", ckpt);
	WT_CHECK(run(args, 0) == 0);
	WT_CHECK(out_len == first_len && !memcmp(out, first, first_len));
	WT_CHECK(run(args, 1) == 0);
	WT_CHECK(has("(full forward over the window for each token, on cpu)"));
	/* a seed repeats its sample */
	snprintf(args, sizeof(args), "--ckpt %s --prompt 'Hi ' --seed 5 --top-k 0 "
		 "--temperature 1 --max-new-tokens 40", ckpt);
	WT_CHECK(run(args, 0) == 0);
	memcpy(first, out_buf, out_len);
	first_len = out_len;
	WT_CHECK(run(args, 1) == 0);
	WT_CHECK(out_len > first_len && !memcmp(out, first, first_len));
	WT_CHECK(has("tokens/s"));
	WT_CHECK(has("(KV cache, on cpu)"));
	free(ids.ids);
	weft_ctx_free(ctx);
	weft_model_free(m);

	/* a BPE model: the tokenizer from --tokenizer */
	m = make_run(1200, "bpe", ckpt, sizeof(ckpt));
	weft_model_free(m);
	snprintf(args, sizeof(args), "--ckpt %s/model.safetensors --prompt 'The <|endoftext|>' "
		 "--tokenizer %s/tests/fixtures/tokenizer/gpt2_style.json --max-new-tokens 10",
		 ckpt, getenv("WEFT_SOURCE_DIR"));
	WT_CHECK(run(args, 1) == 0);
	WT_CHECK(!strncmp(out, "The <|endoftext|>", 17));
	WT_CHECK(has("tokens/s"));

	/* errors */
	snprintf(args, sizeof(args), "--ckpt %s --prompt x", ckpt);
	WT_CHECK(run(args, 1) == 1);
	WT_STR_CONTAINS(out, "vocabulary has 1200 ids");
	WT_STR_CONTAINS(out, "--tokenizer");
	snprintf(args, sizeof(args), "--ckpt %s", ckpt);
	WT_CHECK(run(args, 1) == 2);
	WT_STR_CONTAINS(out, "needs --prompt");
	snprintf(args, sizeof(args), "--ckpt %s --prompt x --top-p 0", ckpt);
	WT_CHECK(run(args, 1) == 2);
	WT_STR_CONTAINS(out, "--top-p must be in (0, 1], got '0'");
	snprintf(args, sizeof(args), "--ckpt %s --prompt x --accelerator tpu", ckpt);
	WT_CHECK(run(args, 1) == 2);
	WT_STR_CONTAINS(out, "--accelerator must be cpu or cuda, got 'tpu'");
	snprintf(args, sizeof(args), "--ckpt %s --prompt x", dir);
	WT_CHECK(run(args, 1) == 1);
	WT_STR_CONTAINS(out, "no config beside checkpoint");
	WT_STR_CONTAINS(out, "--config FILE");

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	WT_CHECK(system(cmd) == 0);
	return wt_done("test_generate_cli");
}
