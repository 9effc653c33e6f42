/* trainer.sample: text from the model after validation, rank 0 only.
 * - single process: after each validation (steps 2 and 4) one sample of
 *   the prompt and 24 new bytes in the log and in samples.txt; the greedy
 *   sample at the last step equals, byte for byte, `weft generate
 *   --greedy` from the run's last checkpoint (same weights: the sample is
 *   of the model as trained, and generation is deterministic);
 * - every_n_val: 2 samples after the second validation only;
 * - zero_3 (weights sharded), tp (the model split by columns) and pp (in
 *   stages, made whole by the strategy's gather_params) on 2 processes:
 *   the same equality with the run's checkpoint, and one sample per
 *   validation (rank 0 alone writes);
 * - errors: a vocabulary of 300 with no tokenizer, an empty prompt, a bad
 *   every_n_val, a misspelt key, each one message naming the key. */
#include "train_test.h"

static const char *yaml =
	"seed_everything: 3\n"
	"trainer:\n"
	"  max_steps: 4\n"
	"  val_check_interval: 2\n"
	"  limit_val_batches: 2\n"
	"  num_sanity_val_steps: 0\n"
	"  enable_progress_bar: false\n"
	"  threads: 1\n"
	"  sample: {prompt: 'The ', max_new_tokens: 24, temperature: 0}\n"
	"model: {class: gpt, n_layer: 2, n_head: 2, n_embd: 16, vocab_size: 256,\n"
	"        block_size: 16, bias: true}\n"
	"data: {class: text, paths: [corpus.txt], block_size: 16, batch_size: 4,\n"
	"       val_fraction: 0.1}\n"
	"optimizer: {name: adamw, lr: 1.0e-2}\n";

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* Runs `name` with the extra args; its greedy sample at step 4 (in
 * samples.txt) equals weft generate's from its last checkpoint. */
static void fit_and_compare(const char *name, const char *a1, const char *a2, const char *a3,
			    const char *a4)
{
	char a_name[128], ckpt[256], *samples, *gen;
	const char *s4;
	size_t slen, glen;

	snprintf(a_name, sizeof(a_name), "--trainer.name=%s", name);
	WT_REQUIRE(tt_expect_ok(name, tt_weft(name, "fit", "--config", "s.yaml", a_name,
					      a1 ? a1 : "--trainer.devices=1",
					      a2 ? a2 : "--trainer.strategy=single",
					      a3 ? a3 : "--trainer.accumulate_grad_batches=1",
					      a4 ? a4 : "--trainer.val_check_interval=2")));
	WT_CHECK(count(tt_output(name, "err"), "sample 1 of 1") == 2);
	samples = tt_read(tt_path("runs/%s/version_0/samples.txt", name), &slen);
	WT_REQUIRE(samples);
	WT_CHECK(count(samples, "--- step 2 sample 1\nThe ") == 1);
	s4 = strstr(samples, "--- step 4 sample 1\n");
	WT_REQUIRE(s4);
	s4 += strlen("--- step 4 sample 1\n");
	WT_CHECK(samples + slen - s4 == 4 + 24 + 1); /* the prompt, 24 bytes, a newline */
	snprintf(ckpt, sizeof(ckpt), "runs/%s/version_0/checkpoints/last", name);
	WT_CHECK(tt_weft("gen", "generate", "--ckpt", ckpt, "--prompt", "The ", "--greedy",
			 "--max-new-tokens", "24") == 0);
	gen = tt_read(tt_path("gen.out"), &glen);
	WT_REQUIRE(gen);
	if (!(glen == 29 && !memcmp(gen, s4, 29)))
		fprintf(stderr, "%s: trainer.sample gave '%.*s', weft generate '%.*s'\n", name,
			(int)(samples + slen - s4), s4, (int)glen, gen);
	WT_CHECK(glen == 29 && !memcmp(gen, s4, 29));
	free(samples);
	free(gen);
}

int main(void)
{
	char *samples;

	tt_scratch("train_sample");
	tt_make_text(32 << 10);
	tt_write_text(tt_path("s.yaml"), yaml);

	fit_and_compare("single", NULL, NULL, NULL, NULL);
	fit_and_compare("zero_3", "--trainer.devices=2", "--trainer.strategy=zero_3", NULL, NULL);
	fit_and_compare("tp", "--trainer.devices=2", "--trainer.strategy={name: tp, size: 2}",
			NULL, NULL);
	/* 2 micro-batches a step: validation every 2 steps is every 4 batches */
	fit_and_compare("pp", "--trainer.devices=2", "--trainer.strategy=pp",
			"--trainer.accumulate_grad_batches=2", "--trainer.val_check_interval=4");

	WT_REQUIRE(tt_expect_ok("every2", tt_weft("every2", "fit", "--config", "s.yaml",
						  "--trainer.name=every2",
						  "--trainer.sample.every_n_val=2")));
	samples = tt_read(tt_path("runs/every2/version_0/samples.txt"), NULL);
	WT_REQUIRE(samples);
	WT_CHECK(!strstr(samples, "--- step 2") && strstr(samples, "--- step 4 sample 1\n"));
	free(samples);

	WT_CHECK(tt_weft("v300", "fit", "--config", "s.yaml", "--model.vocab_size=300") == 1);
	WT_STR_CONTAINS(tt_output("v300", "err"), "needs text for the model's 300 ids: give "
			"data.tokenizer");
	WT_CHECK(tt_weft("empty", "fit", "--config", "s.yaml", "--trainer.sample.prompt=''") ==
		 1);
	WT_STR_CONTAINS(tt_output("empty", "err"), "is empty; give at least one character");
	WT_CHECK(tt_weft("every0", "fit", "--config", "s.yaml",
			 "--trainer.sample.every_n_val=0") == 1);
	WT_STR_CONTAINS(tt_output("every0", "err"), "must be >= 1 (1: after every validation)");
	WT_CHECK(tt_weft("typo", "fit", "--config", "s.yaml",
			 "--trainer.sample.temprature=0.5") == 1);
	WT_STR_CONTAINS(tt_output("typo", "err"), "temprature");
	tt_cleanup();
	return wt_done("test_train_sample");
}
