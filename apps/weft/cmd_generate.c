/* `weft generate --ckpt DIR [--config FILE] --prompt TEXT [options]`:
 * text from a trained language model (core/generate), with the BPE
 * tokenizer of --tokenizer or the config's data.tokenizer, or raw bytes for
 * a byte-level model. A transformer decodes with its KV cache. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "generate/generate.h"
#include "text/tokenizer.h"
#include "weft/weft.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: weft generate --ckpt CHECKPOINT [--config FILE] --prompt TEXT\n"
		"                     [--tokenizer tokenizer.json] [--max-new-tokens N]\n"
		"                     [--temperature T | --greedy] [--top-k K] [--top-p P]\n"
		"                     [--seed S] [--no-stop] [--no-kv-cache]\n"
		"                     [--accelerator cpu|cuda]\n"
		"\nprints the prompt and what the model writes after it. CHECKPOINT is a\n"
		"checkpoint directory of weft fit (its model.safetensors), a safetensors file,\n"
		"or a Hugging Face directory (config.json and its weights, as save_pretrained\n"
		"writes them). The model is built from --config's model section, by default\n"
		"the config.yaml of the run the checkpoint directory belongs to, or a Hugging\n"
		"Face directory's config.json. Text goes through --tokenizer, else the\n"
		"config's data.tokenizer, else a Hugging Face directory's tokenizer.json,\n"
		"else it is raw bytes (a byte-level model, vocabulary 256). Defaults: --max-new-tokens 200,\n"
		"--temperature 0.8, --top-k 200, --top-p 1, --seed 1337 (nanoGPT's); --greedy\n"
		"(or --temperature 0, or --top-k 1) takes the most likely token each time.\n"
		"Generation stops at the tokenizer's end-of-text token unless --no-stop.\n"
		"A transformer runs the prompt once and then each new token alone, with its\n"
		"keys and values cached (past the block size the window slides and is run\n"
		"again for each token); --no-kv-cache runs the model over the whole window\n"
		"for every token instead. --accelerator runs the model on the CPU or on\n"
		"cuda:0 (weights loaded there, the logits copied back for sampling);\n"
		"default: the config's trainer.accelerator, where the run was trained (cpu\n"
		"without one, as for a Hugging Face directory; auto: cuda where a CUDA\n"
		"device is usable). Tokens/s goes to stderr.\n");
}

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "weft generate: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see weft generate --help)\n");
	return 2;
}

static int is_dir(const char *p)
{
	struct stat sb;

	return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Whether dir/file is readable. */
static int has_file(const char *dir, const char *file)
{
	char p[PATH_MAX + 32];

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	return access(p, R_OK) == 0;
}

/* A model section that builds and loads the Hugging Face directory `dir`
 * (model.init_from reads its config.json and weights), the path quoted. */
static weft_status hf_config(const char *dir, weft_config **cfg)
{
	char yaml[2 * PATH_MAX + 64];
	size_t n = (size_t)snprintf(yaml, sizeof(yaml), "model: {class: gpt, init_from: '");

	for (const char *c = dir; *c && n + 8 < sizeof(yaml); c++) {
		if (*c == '\'')
			yaml[n++] = '\''; /* YAML's single quote, doubled */
		yaml[n++] = *c;
	}
	n += (size_t)snprintf(yaml + n, sizeof(yaml) - n, "'}\n");
	return weft_config_load_string("the Hugging Face directory's model", yaml, n, cfg);
}

/* The run's config.yaml for a checkpoint directory
 * runs/<name>/version_<N>/checkpoints/<ckpt>. */
static weft_status find_config(const char *ckpt, char *out, size_t cap)
{
	char resolved[PATH_MAX];

	if (!realpath(ckpt, resolved))
		return weft_error_set(WEFT_ERR_NOT_FOUND, "checkpoint '%s' not found: %s", ckpt,
				      strerror(errno));
	if (!is_dir(resolved)) {
		char *slash = strrchr(resolved, '/');

		if (slash)
			*slash = 0; /* a model.safetensors inside the checkpoint */
	}
	snprintf(out, cap, "%s/../../config.yaml", resolved);
	if (access(out, R_OK) != 0)
		return weft_error_set(WEFT_ERR_NOT_FOUND, "no config beside checkpoint '%s' (looked "
				      "for '%s', where weft fit writes the run's config.yaml); give "
				      "--config FILE with the model section it was trained with",
				      ckpt, out);
	return WEFT_OK;
}

typedef struct printer {
	const weft_tokenizer *tok; /* NULL: bytes */
	int64_t eos;
} printer;

static int print_token(void *arg, uint32_t id)
{
	const printer *p = arg;
	const uint8_t *b;
	size_t len;
	uint8_t byte = (uint8_t)id;

	if ((int64_t)id == p->eos)
		return 0;
	if (p->tok) {
		b = weft_tokenizer_token_bytes(p->tok, id, &len);
		if (!b || weft_tokenizer_is_special(p->tok, id))
			return 0;
	} else {
		if (id > 255)
			return 0;
		b = &byte;
		len = 1;
	}
	fwrite(b, 1, len, stdout);
	fflush(stdout);
	return 0;
}

/* The device of `--accelerator` (accel, may be NULL) or else of the
 * config's trainer.accelerator: cpu, cuda (gpu: cuda) or auto (cuda where
 * the CUDA kernels load, else cpu). */
static weft_status pick_device(const weft_config *cfg, const char *accel, weft_device *out)
{
	static const char *const accels[] = { "cpu", "cuda", "gpu", "auto", NULL };
	const weft_kernel_table *k;
	int which = 0;
	weft_status st;

	*out = WEFT_CPU;
	if (accel)
		which = !strcmp(accel, "cuda"); /* checked with the options */
	else if ((st = weft_cfg_choice(weft_cfg_get(weft_config_root(cfg), "trainer"),
				       "accelerator", accels, "cpu", &which)))
		return st;
	if (which == 3) {
		weft_device cuda = { .type = WEFT_DEVICE_CUDA, .index = 0 };

		which = weft_kernels_get(cuda, &k) == WEFT_OK;
		weft_error_clear();
	}
	if (which)
		out->type = WEFT_DEVICE_CUDA;
	return WEFT_OK;
}

int weft_cmd_generate(int argc, char **argv)
{
	const char *ckpt = NULL, *cfg_path = NULL, *tok_path = NULL, *prompt = NULL;
	const char *accel = NULL;
	char dev[32];
	char cfg_buf[PATH_MAX + 32], weights[PATH_MAX + 32], tok_buf[PATH_MAX + 32];
	weft_gen_options o = { .max_new_tokens = 200, .temperature = 0.8, .top_k = 200,
			       .top_p = 1.0, .seed = 1337, .eos_id = -1 };
	int no_stop = 0, hf;
	weft_config *cfg = NULL;
	weft_model *m = NULL;
	weft_ctx *ctx = NULL;
	weft_tokenizer *tok = NULL;
	weft_tokenizer_encoder *enc = NULL;
	weft_token_ids ids = { 0 }, out = { 0 };
	weft_model_options mo = { .seed = 0, .no_grads = 1 };
	weft_ctx_options co = { 0 };
	const weft_gpt_config *gpt;
	weft_gen_stats stats;
	printer pr = { .eos = -1 };
	int64_t vocab;
	weft_status st;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int has = i + 1 < argc;
		char *end = NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--ckpt") && has) {
			ckpt = argv[++i];
		} else if ((!strcmp(a, "--config") || !strcmp(a, "-c")) && has) {
			cfg_path = argv[++i];
		} else if (!strcmp(a, "--tokenizer") && has) {
			tok_path = argv[++i];
		} else if (!strcmp(a, "--prompt") && has) {
			prompt = argv[++i];
		} else if (!strcmp(a, "--max-new-tokens") && has) {
			o.max_new_tokens = strtoll(argv[++i], &end, 10);
			if (*end || o.max_new_tokens < 0)
				return bad_usage("--max-new-tokens must be an integer >= 0, got '%s'",
						 argv[i]);
		} else if (!strcmp(a, "--temperature") && has) {
			o.temperature = strtod(argv[++i], &end);
			if (*end || !(o.temperature >= 0) || o.temperature > 1e6)
				return bad_usage("--temperature must be a number >= 0 (0: greedy), "
						 "got '%s'", argv[i]);
		} else if (!strcmp(a, "--greedy")) {
			o.temperature = 0;
		} else if (!strcmp(a, "--top-k") && has) {
			o.top_k = strtoll(argv[++i], &end, 10);
			if (*end || o.top_k < 0)
				return bad_usage("--top-k must be an integer >= 0 (0: no limit), got "
						 "'%s'", argv[i]);
		} else if (!strcmp(a, "--top-p") && has) {
			o.top_p = strtod(argv[++i], &end);
			if (*end || !(o.top_p > 0 && o.top_p <= 1))
				return bad_usage("--top-p must be in (0, 1], got '%s'", argv[i]);
		} else if (!strcmp(a, "--seed") && has) {
			o.seed = strtoull(argv[++i], &end, 10);
			if (*end)
				return bad_usage("--seed must be an integer, got '%s'", argv[i]);
		} else if (!strcmp(a, "--no-stop")) {
			no_stop = 1;
		} else if (!strcmp(a, "--no-kv-cache")) {
			o.no_kv_cache = 1;
		} else if (!strcmp(a, "--accelerator") && has) {
			accel = argv[++i];
			if (strcmp(accel, "cpu") && strcmp(accel, "cuda"))
				return bad_usage("--accelerator must be cpu or cuda, got '%s'",
						 accel);
		} else {
			return bad_usage("unknown option or missing value: '%s'", a);
		}
	}
	if (!ckpt || !prompt)
		return bad_usage("%s", !ckpt ? "needs --ckpt CHECKPOINT (a checkpoint directory "
				 "or a safetensors file)" : "needs --prompt TEXT");
	hf = is_dir(ckpt) && has_file(ckpt, "config.json");
	if (!cfg_path && hf) {
		st = hf_config(ckpt, &cfg);
		cfg_path = ckpt;
	} else {
		if (!cfg_path && (st = find_config(ckpt, cfg_buf, sizeof(cfg_buf))))
			goto out;
		if (!cfg_path)
			cfg_path = cfg_buf;
		st = weft_config_load_file(cfg_path, &cfg);
	}
	if (st || (st = pick_device(cfg, accel, &mo.device)))
		goto out;
	co.device = mo.device;
	st = weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"), &mo, &m);
	if (st)
		goto out;
	/* a Hugging Face directory loads as a whole (its names, shards, tied head) */
	snprintf(weights, sizeof(weights), is_dir(ckpt) && !hf ? "%s/model.safetensors" : "%s",
		 ckpt);
	if (cfg_path != ckpt)
		st = weft_model_load_safetensors(m, weights);
	if (st)
		goto out;
	gpt = weft_model_gpt_config(m);
	if (!gpt) {
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "'%s' builds no language model "
				    "(model.class gpt); weft generate samples token ids", cfg_path);
		goto out;
	}
	vocab = gpt->vocab_size;
	o.context = gpt->block_size;
	if (!tok_path) {
		const weft_cfg *data = weft_cfg_get(weft_config_root(cfg), "data");
		const weft_cfg *t = data ? weft_cfg_get(data, "tokenizer") : NULL;

		tok_path = t ? weft_cfg_scalar(t) : NULL;
	}
	if (!tok_path && hf && has_file(ckpt, "tokenizer.json")) {
		snprintf(tok_buf, sizeof(tok_buf), "%s/tokenizer.json", ckpt);
		tok_path = tok_buf;
	}
	if (tok_path) {
		st = weft_tokenizer_load(tok_path, &tok);
		if (!st && weft_tokenizer_vocab_size(tok) > vocab)
			st = weft_error_set(WEFT_ERR_INVALID_ARG, "tokenizer '%s' has %" PRId64 " ids "
					    "but the model's vocabulary only %" PRId64 "; give the "
					    "tokenizer the model was trained with", tok_path,
					    weft_tokenizer_vocab_size(tok), vocab);
		if (!st)
			st = weft_tokenizer_encoder_create(tok, &enc);
		if (!st)
			st = weft_tokenizer_encode(enc, prompt, strlen(prompt), &ids);
		if (st)
			goto out;
		o.eos_id = no_stop ? -1 : weft_tokenizer_eos_id(tok);
		pr.tok = tok;
	} else {
		if (vocab != 256) {
			st = weft_error_set(WEFT_ERR_INVALID_ARG, "the model's vocabulary has %" PRId64
					    " ids, so it reads no raw bytes; give --tokenizer "
					    "tokenizer.json (the config has no data.tokenizer)", vocab);
			goto out;
		}
		for (const char *c = prompt; *c; c++) {
			if (ids.n == ids.cap) {
				uint32_t *p;

				ids.cap = ids.cap ? 2 * ids.cap : 256;
				p = realloc(ids.ids, ids.cap * sizeof(*p));
				if (!p) {
					st = weft_error_set(WEFT_ERR_NOMEM, "out of memory");
					goto out;
				}
				ids.ids = p;
			}
			ids.ids[ids.n++] = (uint8_t)*c;
		}
	}
	if (ids.n == 0) {
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "--prompt is empty; give at least one "
				    "character to start from");
		goto out;
	}
	pr.eos = o.eos_id;
	o.on_token = print_token;
	o.arg = &pr;
	st = weft_ctx_create(&co, &ctx);
	if (st)
		goto out;
	fputs(prompt, stdout);
	fflush(stdout);
	st = weft_generate(m, ctx, ids.ids, ids.n, &o, &out, &stats);
	if (st)
		goto out;
	printf("\n");
	fflush(stdout); /* the text before the figures, also when both go to one pipe */
	fprintf(stderr, "weft generate: %" PRId64 " new tokens in %.2f s, %.1f tokens/s%s (%s, "
		"on %s)\n", stats.new_tokens, stats.seconds,
		stats.seconds > 0 ? (double)stats.new_tokens / stats.seconds : 0,
		stats.stopped_at_eos ? ", stopped at end-of-text" : "",
		stats.kv_cache ? "KV cache" : "full forward over the window for each token",
		weft_device_str(mo.device, dev, sizeof(dev)));
out:
	free(ids.ids);
	free(out.ids);
	weft_tokenizer_encoder_free(enc);
	weft_tokenizer_free(tok);
	weft_ctx_free(ctx);
	weft_model_free(m);
	weft_config_free(cfg);
	return st ? weft_cli_fail() : 0;
}
