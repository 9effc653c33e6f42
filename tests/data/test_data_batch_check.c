/* The host check of each batch's indices (weft_batch_check_indices,
 * core/data/batch_check.c), which the CUDA embedding and cross-entropy rely
 * on instead of waiting to read theirs back (weft/kernels.h, ABI 1.6):
 *  - a language-model batch whose ids and targets lie in [0, vocab) passes,
 *    and so does a target equal to the ignore index;
 *  - an id outside the vocabulary is refused naming the batch, the
 *    position (flat, as the embedding kernel counts it) and the id, in the
 *    CPU kernel's words, with its advice; the first bad one is named;
 *  - a target outside [0, vocab) that is not the ignore index is refused
 *    naming the row and the target, and the model key to check;
 *  - a classification batch (F32 features) checks only its labels, and
 *    limits of 0 (a model plugin: unknown) check nothing. */
#include <stdint.h>
#include <string.h>

#include "data/batch.h"
#include "weft_test.h"

enum { B = 2, T = 5 };

static int32_t xs[B * T], ys[B * T];
static float feats[B * 3];

static weft_host_batch lm_batch(void)
{
	weft_host_batch b = { .epoch = 3, .index = 7, .rows = B };

	b.x = (weft_host_array){ .dtype = WEFT_HOST_I32, .ndim = 2, .shape = { B, T },
				 .data = xs, .capacity = sizeof(xs) };
	b.y = (weft_host_array){ .dtype = WEFT_HOST_I32, .ndim = 2, .shape = { B, T },
				 .data = ys, .capacity = sizeof(ys) };
	for (int i = 0; i < B * T; i++) {
		xs[i] = (i * 7) % 50;
		ys[i] = (i * 7 + 1) % 50;
	}
	return b;
}

int main(void)
{
	const weft_batch_limits gpt = { .id_limit = 50, .target_limit = 50, .ignore_index = -1,
					.target_what = "model.vocab_size" };
	const weft_batch_limits mlp = { .target_limit = 10, .ignore_index = -100,
					.target_what = "model.num_classes" };
	const weft_batch_limits none = { 0 };
	weft_host_batch b = lm_batch(), c;

	WT_OK(weft_batch_check_indices(&b, &gpt));
	ys[4] = -1; /* ignored */
	WT_OK(weft_batch_check_indices(&b, &gpt));

	xs[6] = 50;
	xs[8] = -2;
	WT_FAILS(weft_batch_check_indices(&b, &gpt), WEFT_ERR_INVALID_ARG,
		 "batch 7 of epoch 3: id 50 at position 6 is outside the table's vocab [0, 50)",
		 "check the tokenizer or the vocab_size");
	WT_OK(weft_batch_check_indices(&b, &none));

	b = lm_batch();
	ys[9] = 57;
	WT_FAILS(weft_batch_check_indices(&b, &gpt), WEFT_ERR_INVALID_ARG,
		 "batch 7 of epoch 3: target 57 at row 9 is outside [0, 50) and is not the "
		 "ignore index -1", "model.vocab_size");
	ys[9] = -1;
	ys[2] = -100; /* not the GPT's ignore index */
	WT_FAILS(weft_batch_check_indices(&b, &gpt), WEFT_ERR_INVALID_ARG,
		 "target -100 at row 2");

	c = (weft_host_batch){ .epoch = 0, .index = 1, .rows = B };
	c.x = (weft_host_array){ .dtype = WEFT_HOST_F32, .ndim = 2, .shape = { B, 3 },
				 .data = feats, .capacity = sizeof(feats) };
	c.y = (weft_host_array){ .dtype = WEFT_HOST_I32, .ndim = 1, .shape = { B },
				 .data = ys, .capacity = sizeof(ys) };
	ys[0] = 9;
	ys[1] = -100;
	WT_OK(weft_batch_check_indices(&c, &mlp));
	ys[1] = 10;
	WT_FAILS(weft_batch_check_indices(&c, &mlp), WEFT_ERR_INVALID_ARG,
		 "batch 1 of epoch 0: target 10 at row 1 is outside [0, 10) and is not the "
		 "ignore index -100", "model.num_classes");
	return wt_done("test_data_batch_check");
}
