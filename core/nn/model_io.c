/* Model weights to and from safetensors files, with every name, shape and
 * dtype checked before anything is changed. */
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"
#include "nn/safetensors.h"

weft_status weft_model_save_safetensors(const weft_model *m, const char *path)
{
	size_t n = weft_params_count(m->params);
	weft_st_entry *e;
	void **host;
	int on_cpu = m->opt.device.type == WEFT_DEVICE_CPU;
	weft_status st = WEFT_OK;

	if (m->tp) /* shards under whole names would not load anywhere */
		return weft_error_set(WEFT_ERR_INVALID_ARG, "save %s: this model holds tensor-"
				      "parallel shards (tp rank %d of %d); save the model "
				      "weft_model_gather_whole returns", path, (int)m->opt.tp_rank,
				      (int)m->opt.tp_size);
	e = calloc(n ? n : 1, sizeof(*e));
	host = calloc(n ? n : 1, sizeof(*host));

	if (!e || !host) {
		st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory saving the model", path);
		goto out_free;
	}
	for (size_t i = 0; i < n; i++) {
		const weft_tensor *p = weft_params_at(m->params, i);

		e[i] = (weft_st_entry){ .name = p->name, .dtype = (weft_dtype)p->dtype,
					.ndim = p->ndim, .shape = p->shape, .data = p->data };
		if (on_cpu)
			continue;
		host[i] = malloc(weft_tensor_nbytes(p) ? weft_tensor_nbytes(p) : 1);
		if (!host[i]) {
			st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory copying '%s' to the "
					    "host", path, p->name);
			goto out_free;
		}
		if ((st = weft_tensor_copy_to_host(p, host[i], weft_tensor_nbytes(p))))
			goto out_free;
		e[i].data = host[i];
	}
	st = weft_st_write(path, e, n);
out_free:
	for (size_t i = 0; host && i < n; i++)
		free(host[i]);
	free(host);
	free(e);
	return st;
}

static const char *shape_of(const weft_st_tensor *t, char *buf, size_t len)
{
	weft_tensor tmp = { .ndim = t->ndim };

	memcpy(tmp.shape, t->shape, sizeof(tmp.shape));
	return weft_shape_str(&tmp, buf, len);
}

static int same_shape(const weft_st_tensor *t, const weft_tensor *p)
{
	return t->ndim == p->ndim && !memcmp(t->shape, p->shape, (size_t)p->ndim * sizeof(int64_t));
}

/* A tensor in the file that is not a parameter: only the tied head's
 * weight, equal to the embedding, is accepted. */
static weft_status check_extra(const weft_model *m, const weft_st_file *f,
			       const weft_st_tensor *t)
{
	const weft_tensor *wte = m->cls == WEFT_MODEL_GPT ? m->wte : NULL;
	const weft_st_tensor *fw = weft_st_find(f, "transformer.wte.weight");
	char a[160], b[160];

	if (!strcmp(t->name, "lm_head.weight") && wte && (m->stage & WEFT_STAGE_HEAD)) {
		if (t->dtype != WEFT_F32 || !same_shape(t, wte) || !fw ||
		    (fw->end - fw->begin) != (t->end - t->begin) ||
		    memcmp(fw->data, t->data, t->end - t->begin))
			return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: 'lm_head.weight' (%s %s) "
					      "differs from 'transformer.wte.weight', but this model "
					      "ties them (nanoGPT's weight tying); save the file from "
					      "a tied model or drop lm_head.weight", f->path,
					      weft_dtype_name(t->dtype), shape_of(t, a, sizeof(a)));
		return WEFT_OK;
	}
	return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: the file holds tensor '%s' %s, which "
			      "this model does not have (its %zu parameters start with '%s'); was "
			      "the file saved from a different model or config?", f->path, t->name,
			      shape_of(t, b, sizeof(b)), weft_params_count(m->params),
			      weft_params_count(m->params) ?
			      weft_params_at(m->params, 0)->name : "");
}

weft_status weft_model_load_safetensors(weft_model *m, const char *path)
{
	return m->ops->load ? m->ops->load(m, path) : nn_model_load_file(m, path);
}

weft_status nn_model_load_file(weft_model *m, const char *path)
{
	size_t n = weft_params_count(m->params);
	weft_st_file *f;
	char a[160], b[160];
	weft_status st;

	if ((st = weft_st_open(path, &f)))
		return st;
	for (size_t i = 0; i < n; i++) {
		const weft_tensor *p = weft_params_at(m->params, i);
		const weft_st_tensor *t = weft_st_find(f, p->name);

		if (!t) {
			st = weft_error_set(WEFT_ERR_NOT_FOUND, "%s: parameter '%s' %s is missing from "
					    "the file; was it saved from a different model or "
					    "config?", path, p->name, weft_shape_str(p, a, sizeof(a)));
			goto out_close;
		}
		if ((int32_t)t->dtype != p->dtype) {
			st = weft_error_set(WEFT_ERR_DTYPE, "%s: tensor '%s' is %s in the file but the "
					    "model's parameter is %s; convert the file to %s",
					    path, p->name, weft_dtype_name(t->dtype),
					    weft_dtype_name((weft_dtype)p->dtype),
					    weft_dtype_name((weft_dtype)p->dtype));
			goto out_close;
		}
		if (!same_shape(t, p)) {
			st = weft_error_set(WEFT_ERR_SHAPE, "%s: tensor '%s' has shape %s in the file "
					    "but the model expects %s; does the model config "
					    "match the one the file was saved with?", path, p->name,
					    shape_of(t, a, sizeof(a)), weft_shape_str(p, b, sizeof(b)));
			goto out_close;
		}
	}
	for (size_t i = 0; i < f->count; i++)
		if (!weft_params_find(m->params, f->tensors[i].name) &&
		    (st = check_extra(m, f, &f->tensors[i])))
			goto out_close;
	for (size_t i = 0; i < n && !st; i++) {
		weft_tensor *p = weft_params_at(m->params, i);
		const weft_st_tensor *t = weft_st_find(f, p->name);

		st = weft_tensor_copy_from_host(p, t->data, (size_t)(t->end - t->begin));
	}
out_close:
	weft_st_close(f);
	return st;
}
