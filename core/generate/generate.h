/* generate/generate.h - sampling text from a language model: greedy,
 * temperature, top-k and top-p, a seed, a token budget and a stop token.
 *
 * A whole transformer (model.class gpt, nn/gpt_decode.h) generates with a
 * KV cache: the prompt runs in one pass, then each new token alone at the
 * next position. Its window is the last `context` ids, as without the
 * cache; once the window slides past the block size every position in it
 * changes (learned positions and RoPE angles count from the window's
 * start), so each further token prefills the whole window again, exactly
 * what the forward would compute, at the forward's cost. Any other model
 * is called through weft_model_forward (its class's forward) over the
 * whole window for every token, as nanoGPT's generate does, so any model
 * that maps token ids (1, T) to logits (1, T, V) generates.
 */
#ifndef WEFT_GENERATE_H
#define WEFT_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"
#include "weft/module.h"

typedef struct weft_gen_options {
	int64_t max_new_tokens; /* >= 0 */
	int64_t context;        /* the most ids one forward takes (>= 1): the
				 * model's block size */
	double temperature;     /* 0: greedy (the first arg-max) */
	int64_t top_k;          /* 0: every id; 1: greedy whatever the temperature;
				 * k: the k highest logits (ties at the k-th kept) */
	double top_p;           /* in (0, 1]: the fewest most likely ids whose
				 * probabilities add up to at least top_p */
	uint64_t seed;          /* the sampler's random stream */
	int no_kv_cache;        /* 1: the forward over the whole window for every
				 * token even where the model has a KV cache */
	int64_t eos_id;         /* generation stops after choosing it; -1: never */
	/* (optional) called with each id as it is chosen, the stop id too;
	 * a non-zero return stops generation */
	int (*on_token)(void *arg, uint32_t id);
	void *arg;
} weft_gen_options;

typedef struct weft_gen_stats {
	int64_t new_tokens;     /* ids appended (the stop id included) */
	int stopped_at_eos;
	int kv_cache;           /* whether the KV cache was used */
	double seconds;         /* wall time of the whole generation */
} weft_gen_stats;

/* Appends up to max_new_tokens ids chosen after `prompt` (n >= 1 ids) to
 * *out, running the model in ctx with grad and training off (restored
 * afterwards). Blocks. Errors: WEFT_ERR_INVALID_ARG for an empty prompt
 * or options out of range (naming the option and its value); those of
 * weft_model_forward (an id outside the vocabulary names it);
 * WEFT_ERR_SHAPE when the forward does not return (1, T, V) logits;
 * WEFT_ERR_NOMEM. */
weft_status weft_generate(weft_model *m, weft_ctx *ctx, const uint32_t *prompt, size_t n,
			  const weft_gen_options *o, weft_token_ids *out, weft_gen_stats *stats);

/* Chooses the next id from `v` logits as the options say, drawing from
 * *rng (any start value; advanced). `scratch` holds 2 * v floats and v
 * ints' worth (weft_gen_scratch_bytes). Errors: none beyond the options'
 * (checked by weft_generate). */
uint32_t weft_gen_sample(const float *logits, int64_t v, const weft_gen_options *o,
			 uint64_t *rng, void *scratch);

/* Bytes of scratch weft_gen_sample needs for v logits. */
size_t weft_gen_scratch_bytes(int64_t v);

#endif /* WEFT_GENERATE_H */
