/* nn/gpt_decode.h - incremental decoding of the transformer (model.class
 * gpt, every preset) with a key/value cache, for generation.
 *
 * The prompt runs in one pass (the prefill) through the same ops as the
 * forward, its keys and values (after RoPE) kept per layer on the host;
 * then each new token runs alone at position `len` (learned positions
 * read row `len` of wpe, RoPE rotates by the angle of position `len`),
 * its query attending to every cached key of its layer, query head h to
 * key/value head h / (n_head / n_kv_head). The attention of a token after
 * the prefill runs on the host, so any device whose kernels run the
 * forward also decodes (its q, k and v rows are copied out, the result
 * copied back in): no kernel beyond the forward's is needed.
 *
 * A cache holds at most the positions it was made for (<= block_size);
 * what to do past that is the caller's (weft_generate slides its window: it resets the cache and
 * prefills the window again, see core/generate/generate.c).
 */
#ifndef WEFT_NN_GPT_DECODE_H
#define WEFT_NN_GPT_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "nn/nn_impl.h"

typedef struct nn_kv_cache nn_kv_cache;

/* Whether m decodes with a KV cache: a whole transformer of model.class
 * gpt (the embedding, every block and the head; no tensor parallelism).
 * Other models generate through their forward alone. */
int nn_gpt_decode_supported(const weft_model *m);

/* A new, empty cache for m (nn_gpt_decode_supported) holding `positions`
 * (<= 0 or more than block_size: block_size): 2 x n_layer x n_kv_head x
 * positions x head size floats, so a generation sizes it to what it can
 * reach (a Llama 3 preset's block size is 131072). Free with
 * nn_kv_cache_free. Errors: WEFT_ERR_UNSUPPORTED for a model that does not
 * decode; WEFT_ERR_NOMEM naming the bytes. */
weft_status nn_kv_cache_create(const weft_model *m, int64_t positions, nn_kv_cache **out);
void nn_kv_cache_free(nn_kv_cache *c);

/* Positions cached (the next token's position). */
int64_t nn_kv_cache_len(const nn_kv_cache *c);

/* Forgets every position (the next call starts at position 0). */
void nn_kv_cache_reset(nn_kv_cache *c);

/* Runs the n >= 1 ids at positions len .. len + n - 1 of the cache c
 * (made for m), appends their keys and values, and points *logits at the
 * last id's *v logits (F32, host; owned by the cache, valid until the
 * next call). Uses ctx's arena (the caller begins its step) with the
 * caller's grad and training settings (generation turns both off).
 * Blocks. Errors: WEFT_ERR_INVALID_ARG when len + n passes block_size
 * (naming both; reset and prefill the window) or an id is outside the
 * vocabulary (naming it); those of the forward's ops; WEFT_ERR_NOMEM. */
weft_status nn_gpt_decode(weft_model *m, weft_ctx *ctx, nn_kv_cache *c, const uint32_t *ids,
			  size_t n, const float **logits, int64_t *v);

/* The block's norm and activation are gpt_layers.c's (nn_impl.h), as the
 * forward runs them. */

#endif /* WEFT_NN_GPT_DECODE_H */
