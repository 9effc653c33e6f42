/* `weft plan` and `weft ckpt` end to end, with a zero_3 run of `weft fit`
 * on 2 ranks (a character GPT on Debian's fortunes; skipped, exit 77, when
 * the fortunes file is absent):
 * - plan prints the per-rank bytes and the paper's formula; bad arguments
 *   and unknown strategies are errors that say what to do;
 * - ckpt inspect names the strategy, world size, slots and tensors;
 * - ckpt export --optimizer writes a safetensors file whose weights equal
 *   model.safetensors and whose "<param>.<slot>" tensors equal the
 *   parameter's slice of optimizer.bin, bit for bit;
 * - ckpt reshard says the checkpoint loads as it is;
 * - the zero_3 checkpoint resumes under ddp (the trainer's gather_params
 *   path) and the run goes on to its last step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/safetensors.h"
#include "cli_run.h"
#include "weft_test.h"

#define FORTUNES "/usr/share/games/fortunes/fortunes"

static char weft_bin[1024], work[256];

static void write_config(const char *path, const char *strategy, int steps, const char *extra)
{
	FILE *f = fopen(path, "w");

	WT_REQUIRE(f);
	fprintf(f, "seed_everything: 7\n"
		"trainer:\n"
		"  accelerator: cpu\n"
		"  devices: 2\n"
		"  strategy: %s\n"
		"  max_steps: %d\n"
		"  limit_val_batches: 1\n"
		"  log_every_n_steps: 1\n"
		"  gradient_clip_val: 1.0\n"
		"  default_root_dir: %s/runs\n"
		"%s"
		"model: {class: gpt, n_layer: 2, n_head: 2, n_embd: 16, vocab_size: 256, "
		"block_size: 16, bias: true, dropout: 0.0}\n"
		"data: {class: text, paths: [" FORTUNES "], block_size: 16, batch_size: 2, "
		"val_fraction: 0.1}\n"
		"optimizer: {name: adamw, lr: 1.0e-3}\n", strategy, steps, work, extra);
	fclose(f);
}

static void plan_checks(const char *cfg)
{
	WT_CHECK(cli_run("%s plan --config %s --world-size 4", weft_bin, cfg) == 0);
	WT_STR_CONTAINS(cli_out, "ZeRO stage 3");
	WT_STR_CONTAINS(cli_out, "world size 4");
	WT_STR_CONTAINS(cli_out, "16Psi/N");
	WT_STR_CONTAINS(cli_out, "params + grads + optim");
	WT_STR_CONTAINS(cli_out, "communication per step per rank");
	WT_CHECK(cli_run("%s plan --config %s --trainer.strategy=ddp", weft_bin, cfg) == 0);
	WT_STR_CONTAINS(cli_out, "strategy ddp");
	WT_STR_CONTAINS(cli_out, "ring all-reduce");
	WT_CHECK(cli_run("%s plan --config %s --world-size two", weft_bin, cfg) == 2);
	WT_STR_CONTAINS(cli_out, "--world-size wants a number of ranks >= 1, got 'two'");
	WT_CHECK(cli_run("%s plan --config %s --trainer.strategy=zero_7", weft_bin, cfg) == 1);
	WT_STR_CONTAINS(cli_out, "weft plan knows strategies");
	WT_STR_CONTAINS(cli_out, "zero_7");
	WT_CHECK(cli_run("%s plan", weft_bin) == 2);
	WT_STR_CONTAINS(cli_out, "--config FILE is required");
}

/* The exported file against the checkpoint, tensor by tensor. */
static void export_checks(const char *ckpt)
{
	char path[512], exp[512];
	weft_st_file *model = NULL, *ex = NULL;
	FILE *f;
	long numel = 0, flat = 0;

	snprintf(exp, sizeof(exp), "%s/export.safetensors", work);
	WT_CHECK(cli_run("%s ckpt export %s %s --optimizer", weft_bin, ckpt, exp) == 0);
	WT_STR_CONTAINS(cli_out, "with optimizer state");
	snprintf(path, sizeof(path), "%s/model.safetensors", ckpt);
	WT_OK(weft_st_open(path, &model));
	WT_OK(weft_st_open(exp, &ex));
	/* and lm_head.weight, the tied head, as nanoGPT's state dict has it */
	WT_CHECK(ex->count == 3 * model->count + 1);
	{
		const weft_st_tensor *h = weft_st_find(ex, "lm_head.weight");
		const weft_st_tensor *e = weft_st_find(model, "transformer.wte.weight");

		WT_REQUIRE(h && e && h->end - h->begin == e->end - e->begin);
		WT_CHECK(!memcmp(h->data, e->data, e->end - e->begin));
	}
	for (size_t i = 0; i < model->count; i++)
		numel += (long)((model->tensors[i].end - model->tensors[i].begin) / 4);
	snprintf(path, sizeof(path), "%s/optimizer.bin", ckpt);
	f = fopen(path, "rb");
	WT_REQUIRE(f);
	for (size_t i = 0; i < model->count; i++) {
		const weft_st_tensor *t = &model->tensors[i], *w;
		size_t bytes = (size_t)(t->end - t->begin);
		char name[300];

		w = weft_st_find(ex, t->name);
		WT_REQUIRE(w && w->end - w->begin == bytes);
		WT_CHECK(!memcmp(w->data, t->data, bytes));
		for (int k = 0; k < 2; k++) {
			const weft_st_tensor *s;
			char *buf = malloc(bytes);

			snprintf(name, sizeof(name), "%s.%s", t->name, k ? "exp_avg_sq" : "exp_avg");
			s = weft_st_find(ex, name);
			WT_REQUIRE(s && buf && s->end - s->begin == bytes);
			WT_REQUIRE(fseek(f, 4 * ((long)k * numel + flat), SEEK_SET) == 0);
			WT_REQUIRE(fread(buf, 1, bytes, f) == bytes);
			WT_CHECK(!memcmp(s->data, buf, bytes));
			free(buf);
		}
		flat += (long)(bytes / 4);
	}
	fclose(f);
	weft_st_close(model);
	weft_st_close(ex);
	WT_CHECK(cli_run("%s ckpt export %s %s --weights-only", weft_bin, ckpt, exp) == 2);
	WT_STR_CONTAINS(cli_out, "unknown option '--weights-only'");
	unlink(exp);
}

int main(void)
{
	const char *bd = getenv("WEFT_BUILD_DIR");
	char cfg[512], cfg2[512], ckpt[512];
	struct stat sb;

	if (stat(FORTUNES, &sb) != 0) {
		fprintf(stderr, "skipped: %s is absent (Debian package fortunes-min)\n", FORTUNES);
		return 77;
	}
	WT_REQUIRE(bd);
	snprintf(weft_bin, sizeof(weft_bin), "%s/bin/weft", bd);
	snprintf(work, sizeof(work), "/tmp/weft-zero-cli-%d", (int)getpid());
	WT_REQUIRE(mkdir(work, 0755) == 0);
	snprintf(cfg, sizeof(cfg), "%s/z3.yaml", work);
	write_config(cfg, "{name: zero_3, stage3_param_persistence_threshold: 100}", 4, "");
	plan_checks(cfg);

	WT_CHECK(cli_run("cd %s && %s fit --config %s", work, weft_bin, cfg) == 0);
	snprintf(ckpt, sizeof(ckpt), "%s/runs/z3/version_0/checkpoints/last", work);
	WT_CHECK(cli_run("%s ckpt inspect %s", weft_bin, ckpt) == 0);
	WT_STR_CONTAINS(cli_out, "step 4");
	WT_STR_CONTAINS(cli_out, "saved by strategy zero_3 on 2 ranks");
	WT_STR_CONTAINS(cli_out, "exp_avg exp_avg_sq");
	WT_STR_CONTAINS(cli_out, "transformer.h.1.mlp.c_proj.weight");
	export_checks(ckpt);
	WT_CHECK(cli_run("%s ckpt reshard %s --world-size 3", weft_bin, ckpt) == 0);
	WT_STR_CONTAINS(cli_out, "loads as it is into any strategy and world size");
	WT_CHECK(cli_run("%s ckpt inspect %s/nowhere", weft_bin, work) == 1);
	WT_STR_CONTAINS(cli_out, "nowhere");

	/* resume the zero_3 save under ddp and go on to step 6 */
	{
		char extra[700];

		snprintf(cfg2, sizeof(cfg2), "%s/resume.yaml", work);
		snprintf(extra, sizeof(extra), "  resume: %s\n", ckpt);
		write_config(cfg2, "ddp", 6, extra);
		WT_CHECK(cli_run("cd %s && %s fit --config %s", work, weft_bin, cfg2) == 0);
		WT_STR_CONTAINS(cli_out, "resumed from");
		WT_STR_CONTAINS(cli_out, "at step 4");
	}
	WT_CHECK(cli_run("rm -rf %s", work) == 0);
	return wt_done("test_strategy_zero_cli");
}
