/* Incremental decoding of the transformer with a key/value cache (see
 * gpt_decode.h): the forward's ops for everything but the attention of
 * tokens after the prefill, which reads the cache on the host. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gpt_decode.h"

struct nn_kv_cache {
	int64_t n_layer, nh, kv, hs, cap, len;
	int64_t width;       /* a packed q | k | v row: (nh + 2 kv) hs */
	int64_t vocab;       /* the head's rows */
	float *k, *v;        /* [layer][kv head][position][hs] */
	float *rows;         /* the fed tokens' q | k | v rows of one layer */
	float *att;          /* their attention output, nh hs a row */
	float *scores;       /* one query's scores, cap */
	float *logits;       /* the last token's, vocab */
	void *raw;           /* conversions of non-F32 activations */
	int32_t *ids;        /* the fed ids, cap */
};

int nn_gpt_decode_supported(const weft_model *m)
{
	return m && m->cls == WEFT_MODEL_GPT && !m->tp && (m->stage & WEFT_STAGE_EMBED) &&
	       (m->stage & WEFT_STAGE_HEAD) && m->layer_begin == 0 &&
	       m->layer_end == m->gpt.n_layer;
}

static int64_t kv_heads(const weft_model *m)
{
	return m->arch.n_kv_head ? m->arch.n_kv_head : m->gpt.n_head;
}

weft_status nn_kv_cache_create(const weft_model *m, int64_t positions, nn_kv_cache **out)
{
	nn_kv_cache *c;
	size_t kv_elems, raw_elems;

	*out = NULL;
	if (!nn_gpt_decode_supported(m))
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "kv cache: only a whole transformer "
				      "(model.class gpt on one stage, no tensor parallelism) "
				      "decodes incrementally; generate through its forward");
	c = calloc(1, sizeof(*c));
	if (!c)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory for a kv cache");
	c->n_layer = m->gpt.n_layer;
	c->nh = m->gpt.n_head;
	c->kv = kv_heads(m);
	c->hs = m->gpt.n_embd / m->gpt.n_head;
	c->cap = positions > 0 && positions < m->gpt.block_size ? positions : m->gpt.block_size;
	c->width = (c->nh + 2 * c->kv) * c->hs;
	c->vocab = (m->head_w ? m->head_w : m->wte)->shape[0];
	kv_elems = (size_t)(c->n_layer * c->kv * c->cap * c->hs);
	/* the largest converted tensor: the fed rows' q | k | v, or the logits */
	raw_elems = (size_t)(c->cap * c->width > c->vocab ? c->cap * c->width : c->vocab);
	c->k = malloc(kv_elems * sizeof(float));
	c->v = malloc(kv_elems * sizeof(float));
	c->rows = malloc((size_t)(c->cap * c->width) * sizeof(float));
	c->att = malloc((size_t)(c->cap * c->nh * c->hs) * sizeof(float));
	c->scores = malloc((size_t)c->cap * sizeof(float));
	c->logits = malloc((size_t)c->vocab * sizeof(float));
	c->raw = malloc(raw_elems * sizeof(float));
	c->ids = malloc((size_t)c->cap * sizeof(int32_t));
	if (!c->k || !c->v || !c->rows || !c->att || !c->scores || !c->logits || !c->raw ||
	    !c->ids) {
		nn_kv_cache_free(c);
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory for a kv cache of %zu bytes "
				      "(2 x %lld layers x %lld kv heads x %lld positions x %lld)",
				      2 * kv_elems * sizeof(float), (long long)m->gpt.n_layer,
				      (long long)kv_heads(m), (long long)c->cap,
				      (long long)(m->gpt.n_embd / m->gpt.n_head));
	}
	*out = c;
	return WEFT_OK;
}

void nn_kv_cache_free(nn_kv_cache *c)
{
	if (!c)
		return;
	free(c->k);
	free(c->v);
	free(c->rows);
	free(c->att);
	free(c->scores);
	free(c->logits);
	free(c->raw);
	free(c->ids);
	free(c);
}

int64_t nn_kv_cache_len(const nn_kv_cache *c)
{
	return c->len;
}

void nn_kv_cache_reset(nn_kv_cache *c)
{
	c->len = 0;
}

/* n elements of t (any device, any float dtype) into host F32 dst. */
static weft_status to_host(nn_kv_cache *c, const weft_tensor *t, float *dst)
{
	weft_status st;

	if (t->dtype == WEFT_F32)
		return weft_tensor_copy_to_host(t, dst, weft_tensor_nbytes(t));
	st = weft_tensor_copy_to_host(t, c->raw, weft_tensor_nbytes(t));
	return st ? st : weft_convert_host(weft_tensor_numel(t), (weft_dtype)t->dtype, c->raw,
					   WEFT_F32, dst);
}

/* Host F32 src into t (any device, any float dtype). */
static weft_status from_host(nn_kv_cache *c, weft_tensor *t, const float *src)
{
	weft_status st;

	if (t->dtype == WEFT_F32)
		return weft_tensor_copy_from_host(t, src, weft_tensor_nbytes(t));
	st = weft_convert_host(weft_tensor_numel(t), WEFT_F32, src, (weft_dtype)t->dtype, c->raw);
	return st ? st : weft_tensor_copy_from_host(t, c->raw, weft_tensor_nbytes(t));
}

/* Row i of layer l's keys (or values) of kv head g at position p. */
static float *cached(const nn_kv_cache *c, float *base, int64_t l, int64_t g, int64_t p)
{
	return base + ((l * c->kv + g) * c->cap + p) * c->hs;
}

/* Keeps the k and v of the T fed rows (c->rows) at positions len ... */
static void store(nn_kv_cache *c, int64_t l, int64_t T)
{
	size_t bytes = (size_t)c->hs * sizeof(float);

	for (int64_t i = 0; i < T; i++) {
		const float *row = c->rows + i * c->width;

		for (int64_t g = 0; g < c->kv; g++) {
			memcpy(cached(c, c->k, l, g, c->len + i), row + (c->nh + g) * c->hs, bytes);
			memcpy(cached(c, c->v, l, g, c->len + i),
			       row + (c->nh + c->kv + g) * c->hs, bytes);
		}
	}
}

/* Causal attention of the T fed queries (positions len + i) over layer
 * l's cached keys and values 0 .. len + i, into c->att (T, nh hs):
 * softmax(q k^T / sqrt(hs)) v per query head, as the forward's kernel. */
static void attend_cached(nn_kv_cache *c, int64_t l, int64_t T)
{
	int64_t hs = c->hs, group = c->nh / c->kv;
	float scale = 1.0f / sqrtf((float)hs);

	for (int64_t i = 0; i < T; i++) {
		int64_t last = c->len + i;

		for (int64_t h = 0; h < c->nh; h++) {
			const float *q = c->rows + i * c->width + h * hs;
			float *o = c->att + (i * c->nh + h) * hs, mx = -INFINITY, sum = 0;
			int64_t g = h / group;

			for (int64_t j = 0; j <= last; j++) {
				const float *k = cached(c, c->k, l, g, j);
				float d = 0;

				for (int64_t e = 0; e < hs; e++)
					d += q[e] * k[e];
				c->scores[j] = scale * d;
				if (c->scores[j] > mx)
					mx = c->scores[j];
			}
			memset(o, 0, (size_t)hs * sizeof(float));
			for (int64_t j = 0; j <= last; j++) {
				const float *v = cached(c, c->v, l, g, j);
				float p = expf(c->scores[j] - mx);

				sum += p;
				for (int64_t e = 0; e < hs; e++)
					o[e] += p * v[e];
			}
			for (int64_t e = 0; e < hs; e++)
				o[e] /= sum;
		}
	}
}

/* One block on the T fed rows x (1, T, C), layer l of the cache. */
static weft_status block_step(weft_model *m, nn_scope *s, nn_kv_cache *c, int64_t l,
			      weft_tensor *x, weft_tensor **out)
{
	gpt_block *b = &m->blocks[l];
	weft_ctx *ctx = s->ctx;
	int64_t T = x->shape[1], nh = c->nh, kv = c->kv;
	int64_t att_shape[3] = { 1, T, nh * c->hs };
	weft_tensor *h, *y, *a;
	weft_status st;

	if ((st = nn_enter(s, b->mod)) || (st = nn_block_norm(m, s, &b->ln_1, x, &h)) ||
	    (st = nn_enter(s, b->attn)) || (st = nn_linear(s, &b->c_attn, h, &y)))
		return st;
	if (m->arch.position == NN_POS_ROPE &&
	    (st = weft_op_rope(ctx, y, &m->arch.rope, nh + kv, c->hs, c->len, &y)))
		return st;
	if ((st = to_host(c, y, c->rows)))
		return st;
	store(c, l, T);
	if (c->len == 0) {
		/* the prefill: the forward's own attention over the fed rows */
		if (m->arch.position == NN_POS_LEARNED && kv == nh)
			st = nn_gpt_attention(m, ctx, y, nh, &a);
		else
			st = nn_gqa_attention(m, ctx, y, nh, kv, &a);
	} else {
		attend_cached(c, l, T);
		st = weft_ctx_tensor(ctx, "attention", (weft_dtype)y->dtype, 3, att_shape, &a);
		if (!st)
			st = from_host(c, a, c->att);
	}
	if (st || (st = nn_linear(s, &b->attn_proj, a, &y)) || (st = nn_leave(s)) ||
	    (st = weft_op_add(ctx, x, y, &x)))
		return st;
	if ((st = nn_block_norm(m, s, &b->ln_2, x, &h)) || (st = nn_enter(s, b->mlp)) ||
	    (st = nn_linear(s, &b->c_fc, h, &y)) || (st = nn_activation(m, ctx, y, &y)) ||
	    (st = nn_linear(s, &b->mlp_proj, y, &y)) || (st = nn_leave(s)) ||
	    (st = weft_op_add(ctx, x, y, &x)) || (st = nn_leave(s)))
		return st;
	*out = x;
	return WEFT_OK;
}

/* Token and position embeddings of the fed ids at positions len ... */
static weft_status embed_step(weft_model *m, nn_scope *s, nn_kv_cache *c, weft_tensor *ids,
			      weft_tensor **out)
{
	weft_ctx *ctx = s->ctx;
	int64_t T = ids->shape[1];
	weft_tensor *pos, *tok, *pe;
	weft_status st;

	if ((st = nn_enter(s, m->wte_mod)) || (st = weft_op_embedding(ctx, ids, m->wte, &tok)) ||
	    (st = nn_leave(s)))
		return st;
	if (!m->wpe) {
		*out = tok;
		return WEFT_OK;
	}
	if ((st = weft_ctx_tensor(ctx, "positions", WEFT_I32, 1, &T, &pos)) ||
	    (st = weft_tensor_copy_from_host(pos, m->positions + c->len,
					     (size_t)T * sizeof(int32_t))))
		return st;
	if ((st = nn_enter(s, m->wpe_mod)) || (st = weft_op_embedding(ctx, pos, m->wpe, &pe)) ||
	    (st = nn_leave(s)))
		return st;
	return weft_op_add(ctx, tok, pe, out);
}

weft_status nn_gpt_decode(weft_model *m, weft_ctx *ctx, nn_kv_cache *c, const uint32_t *ids,
			  size_t n, const float **logits, int64_t *v)
{
	nn_scope s = { .ctx = ctx };
	int64_t T = (int64_t)n, C = m->gpt.n_embd, shape[3] = { 1, T, C };
	weft_tensor in, last, *x, *h;
	weft_status st;

	*logits = NULL;
	*v = 0;
	if (!weft_device_equal(weft_ctx_device(ctx), m->opt.device)) {
		char a[32], b[32];

		return weft_error_set(WEFT_ERR_INVALID_ARG, "kv cache decode: the model is on %s "
				      "but the context runs on %s; make the context on the "
				      "model's device",
				      weft_device_str(m->opt.device, a, sizeof(a)),
				      weft_device_str(weft_ctx_device(ctx), b, sizeof(b)));
	}
	if (n == 0 || T > c->cap - c->len)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "kv cache: %zu new tokens after the "
				      "%lld cached do not fit the cache's %lld positions (at least "
				      "one, at most %lld); reset the cache and run the last "
				      "window", n,
				      (long long)c->len, (long long)c->cap,
				      (long long)(c->cap - c->len));
	for (size_t i = 0; i < n; i++)
		c->ids[i] = (int32_t)ids[i];
	if ((st = weft_tensor_init(&in, WEFT_I32, 2, shape, WEFT_CPU, c->ids)) ||
	    (st = nn_stage_input(ctx, &in, "input", &x)) || (st = nn_enter(&s, m->root)) ||
	    (st = embed_step(m, &s, c, x, &x)))
		goto out_unwind;
	for (int64_t l = 0; l < c->n_layer; l++)
		if ((st = block_step(m, &s, c, l, x, &x)))
			goto out_unwind;
	/* the head on the last row alone */
	shape[1] = 1;
	if ((st = weft_tensor_init(&last, (weft_dtype)x->dtype, 3, shape, x->device,
				   (char *)x->data + (size_t)((T - 1) * C) *
						     weft_dtype_size((weft_dtype)x->dtype))))
		goto out_unwind;
	{
		nn_affine head = { .mod = m->head_mod, .w = m->head_w ? m->head_w : m->wte };

		if ((st = nn_block_norm(m, &s, &m->ln_f, &last, &h)) ||
		    (st = nn_linear(&s, &head, h, &h)) || (st = nn_leave(&s)))
			goto out_unwind;
	}
	if (weft_tensor_numel(h) != c->vocab) {
		st = weft_error_set(WEFT_ERR_SHAPE, "kv cache: the head gave %lld logits for one "
				    "token, not the %lld of its weight",
				    (long long)weft_tensor_numel(h), (long long)c->vocab);
		goto out_unwind;
	}
	if ((st = to_host(c, h, c->logits)))
		goto out_unwind;
	c->len += T;
	*logits = c->logits;
	*v = c->vocab;
	return WEFT_OK;
out_unwind:
	nn_unwind(&s);
	return st;
}
