/* data.tokenizer: the text class encodes its text with a BPE
 * tokenizer.json when loaded: the stream holds exactly the ids of encoding
 * the text in one call (no tolerance: ids are integers), the vocabulary is
 * the tokenizer's, batches come from it; a missing tokenizer file is one
 * message naming the key's place and the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "data/data_module.h"
#include "text/tokenizer.h"
#include "weft/config.h"
#include "weft_test.h"

#define RIDDLES "/usr/share/games/fortunes/riddles"

static weft_status build(const char *yaml, weft_config **cfg, weft_data_module **m)
{
	weft_data_env env = { .world = 1, .rank = 0, .seed = 42 };

	*m = NULL;
	WT_OK(weft_config_load_string("data.yaml", yaml, strlen(yaml), cfg));
	return weft_data_module_from_config(weft_cfg_get(weft_config_root(*cfg), "data"), &env, m);
}

int main(void)
{
	char tok_path[1024], yaml[2048], *text;
	size_t len;
	weft_config *cfg = NULL;
	weft_data_module *m = NULL;
	weft_tokenizer *t;
	weft_tokenizer_encoder *e;
	weft_token_ids want = { 0 };
	weft_loader *l = NULL;
	const weft_host_batch *b;
	int same;

	snprintf(tok_path, sizeof(tok_path), "%s/tests/fixtures/tokenizer/llama3_style.json",
		 getenv("WEFT_SOURCE_DIR") ? getenv("WEFT_SOURCE_DIR") : "..");
	snprintf(yaml, sizeof(yaml), "data:\n  class: text\n  paths: [%s]\n  tokenizer: %s\n"
		 "  block_size: 16\n  batch_size: 4\n  val_fraction: 0.1\n", RIDDLES, tok_path);
	WT_OK(build(yaml, &cfg, &m));
	WT_OK(weft_config_check_unused(cfg));
	WT_OK(weft_tokenizer_load(tok_path, &t));
	WT_OK(weft_tokenizer_encoder_create(t, &e));
	WT_OK(weft_file_read(RIDDLES, WEFT_MEM_OTHER, &text, &len));
	WT_OK(weft_tokenizer_encode(e, text, len, &want));
	WT_CHECK(m->kind == WEFT_DATA_LM && m->vocab_size == weft_tokenizer_vocab_size(t));
	WT_CHECK(m->all_tokens.elem_bytes == 2 && m->all_tokens.n == (int64_t)want.n);
	same = m->all_tokens.n == (int64_t)want.n;
	for (int64_t i = 0; same && i < m->all_tokens.n; i++)
		same = weft_tokens_at(&m->all_tokens, i) == want.ids[i];
	WT_CHECK(same);
	/* fewer tokens than bytes: the merges took effect */
	WT_CHECK(m->all_tokens.n < (int64_t)len / 2);
	WT_CHECK(m->train_examples + m->val_examples == (int64_t)want.n);
	WT_OK(weft_data_module_loader(m, 0, &l));
	WT_OK(weft_loader_start_epoch(l, 0, 0));
	WT_OK(weft_loader_next(l, &b));
	WT_CHECK(b && b->x.shape[0] == 4 && b->x.shape[1] == 16);
	weft_loader_destroy(l);
	weft_data_module_free(m);
	weft_config_free(cfg);

	snprintf(yaml, sizeof(yaml), "data:\n  class: text\n  paths: [%s]\n  tokenizer: "
		 "/nonexistent/tok.json\n  block_size: 16\n", RIDDLES);
	WT_FAILS(build(yaml, &cfg, &m), WEFT_ERR_NOT_FOUND, "data.yaml:4", "data.tokenizer",
		 "/nonexistent/tok.json");
	weft_config_free(cfg);

	free(want.ids);
	weft_mem_free(text);
	weft_tokenizer_encoder_free(e);
	weft_tokenizer_free(t);
	return wt_done("test_data_tokenizer");
}
