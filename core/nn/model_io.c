/* Model weights to and from safetensors files and Hugging Face
 * directories, with every name, shape and dtype checked before anything
 * is changed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/hf.h"
#include "nn/nn_impl.h"
#include "nn/safetensors.h"

void weft_model_st_meta(const weft_model *m, weft_model_meta *out)
{
	memset(out, 0, sizeof(*out));
	if (m->cls != WEFT_MODEL_GPT)
		return;
	/* the shape of the model, for tools that need what the tensors do
	 * not tell (n_head: weft ckpt export --format hf) */
	snprintf(out->v[0], sizeof(out->v[0]), "%lld", (long long)m->gpt.n_layer);
	snprintf(out->v[1], sizeof(out->v[1]), "%lld", (long long)m->gpt.n_head);
	snprintf(out->v[2], sizeof(out->v[2]), "%lld", (long long)m->gpt.n_embd);
	snprintf(out->v[3], sizeof(out->v[3]), "%lld", (long long)m->gpt.vocab_size);
	snprintf(out->v[4], sizeof(out->v[4]), "%lld", (long long)m->gpt.block_size);
	out->pairs[0] = "weft.model";
	out->pairs[1] = "gpt";
	out->pairs[2] = "weft.n_layer";
	out->pairs[3] = out->v[0];
	out->pairs[4] = "weft.n_head";
	out->pairs[5] = out->v[1];
	out->pairs[6] = "weft.n_embd";
	out->pairs[7] = out->v[2];
	out->pairs[8] = "weft.vocab_size";
	out->pairs[9] = out->v[3];
	out->pairs[10] = "weft.block_size";
	out->pairs[11] = out->v[4];
	out->n = 6;
	if (!nn_arch_is_gpt(&m->arch))
		nn_hf_arch_meta_put(&m->gpt, &m->arch, out);
}

weft_status weft_model_save_safetensors(const weft_model *m, const char *path)
{
	size_t n = weft_params_count(m->params);
	weft_st_entry *e;
	void **host;
	int on_cpu = m->opt.device.type == WEFT_DEVICE_CPU;
	weft_model_meta meta;
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
	weft_model_st_meta(m, &meta);
	st = meta.n ? weft_st_write_meta(path, meta.pairs, meta.n, e, n) : weft_st_write(path, e, n);
out_free:
	for (size_t i = 0; host && i < n; i++)
		free(host[i]);
	free(host);
	free(e);
	return st;
}

/* ---- loading ----
 *
 * A checkpoint is one safetensors file (weft's, nanoGPT's, or safetensors'
 * own save_model), a directory holding one (a weft checkpoint), or a
 * Hugging Face directory (nn/hf.h: config.json and one or more weight
 * files, names mapped by the family's table). Only the headers are read
 * first; every name, dtype and shape is checked against the model before
 * anything is changed; then each tensor is read by its range, turned into
 * weft's layout and copied into its parameter, one at a time. */

/* One tensor of the checkpoint under weft's name. */
typedef struct src {
	char name[512];
	size_t file;             /* index into ckpt.files */
	const weft_st_tensor *t;
	nn_hf_how how;
	int part;                /* NN_HF_ROWS: its place among the stacked tensors */
	int used;
	uint64_t bytes;          /* read from the tensor's start: all, or the
				  * first rows of a cropped wpe */
} src;

typedef struct ckpt {
	const char *path;                 /* as given */
	const nn_hf_family *family;       /* a Hugging Face directory; else NULL */
	nn_hf_config hf;
	char **paths;
	weft_st_file **files;             /* headers only */
	int *fds;
	size_t n_files;
	src *srcs;
	size_t n_srcs;
	unsigned char *buf, *tbuf;        /* one tensor, and its transpose */
} ckpt;

static void ckpt_close(ckpt *c)
{
	for (size_t i = 0; i < c->n_files; i++) {
		weft_st_close(c->files ? c->files[i] : NULL);
		if (c->fds && c->fds[i] >= 0)
			close(c->fds[i]);
	}
	nn_hf_paths_free(c->paths, c->n_files);
	free(c->files);
	free(c->fds);
	free(c->srcs);
	free(c->buf);
	free(c->tbuf);
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

static int transposed_shape(const weft_st_tensor *t, const weft_tensor *p)
{
	return t->ndim == 2 && p->ndim == 2 && t->shape[0] == p->shape[1] &&
	       t->shape[1] == p->shape[0];
}

/* The weight files of `path` into c->paths, and the family of a Hugging
 * Face directory (its config checked against the model's). */
static weft_status ckpt_files(const weft_model *m, const char *path, ckpt *c)
{
	struct stat sb;
	char one[4096];
	weft_status st;

	if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		c->paths = calloc(1, sizeof(*c->paths));
		if (!c->paths || !(c->paths[0] = strdup(path)))
			return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", path);
		c->n_files = 1;
		return WEFT_OK;
	}
	if (!nn_hf_is_dir(path)) { /* a weft checkpoint directory */
		snprintf(one, sizeof(one), "%s/%s", path, NN_HF_WEIGHTS);
		if (stat(one, &sb) != 0)
			return weft_error_set(WEFT_ERR_NOT_FOUND, "%s is a directory without %s or "
					      "%s; give a safetensors file, a weft checkpoint "
					      "directory or a Hugging Face model directory", path,
					      NN_HF_WEIGHTS, NN_HF_CONFIG);
		return ckpt_files(m, one, c);
	}
	if ((st = nn_hf_config_read(path, &c->hf)))
		return st;
	c->family = c->hf.family;
	if (m->cls != WEFT_MODEL_GPT)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: a %s checkpoint loads into "
				      "model.class gpt, not this model", path,
				      c->family->architecture);
	if ((st = nn_hf_config_check(&c->hf, path, &m->gpt)) ||
	    (st = nn_hf_arch_check(&c->hf, path, &m->arch)))
		return st;
	return nn_hf_weight_files(path, &c->paths, &c->n_files);
}

/* Opens every file's header and lists its tensors under weft's names;
 * the buffers of GPT-2 checkpoints are skipped when the model lacks them. */
static weft_status ckpt_open(const weft_model *m, const char *path, ckpt *c)
{
	size_t total = 0;
	weft_status st;

	c->path = path;
	if ((st = ckpt_files(m, path, c)))
		return st;
	c->files = calloc(c->n_files, sizeof(*c->files));
	c->fds = malloc(c->n_files * sizeof(*c->fds));
	for (size_t i = 0; c->fds && i < c->n_files; i++)
		c->fds[i] = -1;
	if (!c->files || !c->fds)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", path);
	for (size_t i = 0; i < c->n_files; i++) {
		if ((st = weft_st_open_header(c->paths[i], &c->files[i])))
			return st;
		c->fds[i] = open(c->paths[i], O_RDONLY | O_CLOEXEC);
		if (c->fds[i] < 0)
			return weft_error_set(WEFT_ERR_IO, "%s: cannot open: %s", c->paths[i],
					      strerror(errno));
		total += c->files[i]->count;
	}
	c->srcs = calloc(total ? total : 1, sizeof(*c->srcs));
	if (!c->srcs)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", path);
	for (size_t i = 0; i < c->n_files; i++)
		for (size_t k = 0; k < c->files[i]->count; k++) {
			const weft_st_tensor *t = &c->files[i]->tensors[k];
			src *s = &c->srcs[c->n_srcs];
			const char *name = t->name;

			if (c->family)
				name = nn_hf_to_weft_part(c->family, t->name, s->name,
							  sizeof(s->name), &s->how, &s->part);
			else if (m->cls == WEFT_MODEL_GPT && nn_hf_is_buffer(&nn_hf_gpt2, name))
				name = NULL;
			else
				snprintf(s->name, sizeof(s->name), "%s", t->name);
			if (!name && !weft_params_find(m->params, t->name))
				continue;
			if (!name)
				snprintf(s->name, sizeof(s->name), "%s", t->name);
			s->file = i;
			s->t = t;
			for (size_t j = 0; j < c->n_srcs; j++)
				if (!strcmp(c->srcs[j].name, s->name) && c->srcs[j].part == s->part)
					return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: the checkpoint "
							      "holds '%s' twice (as '%s' in %s and "
							      "'%s' in %s); it is damaged or two "
							      "checkpoints were mixed", path,
							      s->name, c->srcs[j].t->name,
							      c->paths[c->srcs[j].file], t->name,
							      c->paths[i]);
			c->n_srcs++;
		}
	return WEFT_OK;
}

static src *find_src(ckpt *c, const char *name)
{
	for (size_t i = 0; i < c->n_srcs; i++)
		if (!strcmp(c->srcs[i].name, name))
			return &c->srcs[i];
	return NULL;
}

static src *find_part(ckpt *c, const char *name, int part)
{
	for (size_t i = 0; i < c->n_srcs; i++)
		if (!strcmp(c->srcs[i].name, name) && c->srcs[i].part == part)
			return &c->srcs[i];
	return NULL;
}

/* The bytes of s into dst. */
static weft_status read_into(ckpt *c, const src *s, unsigned char *p)
{
	const weft_st_file *f = c->files[s->file];
	uint64_t at = f->data_at + s->t->begin, left = s->bytes;

	while (left) {
		ssize_t got = pread(c->fds[s->file], p, left, (off_t)at);

		if (got <= 0)
			return weft_error_set(WEFT_ERR_IO, "%s: reading tensor '%s' failed: %s",
					      c->paths[s->file], s->t->name,
					      got ? strerror(errno) : "the file shrank");
		p += got;
		at += (uint64_t)got;
		left -= (uint64_t)got;
	}
	return WEFT_OK;
}

/* The bytes of s into c->buf (sized by the caller). */
static weft_status read_src(ckpt *c, const src *s)
{
	return read_into(c, s, c->buf);
}

/* The stacked sources of p (NN_HF_ROWS, s its part 0), checked: parts 0, 1,
 * ... present, each 2-D of p's dtype and columns, their rows summing to
 * p's. */
static weft_status check_rows(ckpt *c, const weft_tensor *p, src *s)
{
	int64_t rows = 0;
	char a[160], b[160];
	src *q;
	int k;

	for (k = 0; (q = find_part(c, p->name, k)); k++) {
		q->used = 1;
		q->bytes = q->t->end - q->t->begin;
		if ((int32_t)q->t->dtype != p->dtype)
			return weft_error_set(WEFT_ERR_DTYPE, "%s: tensor '%s' is %s in the file but "
					      "the model's parameter '%s' is %s; convert the "
					      "checkpoint to %s (model.float() before saving)",
					      c->paths[q->file], q->t->name,
					      weft_dtype_name(q->t->dtype), p->name,
					      weft_dtype_name((weft_dtype)p->dtype),
					      weft_dtype_name((weft_dtype)p->dtype));
		if (q->t->ndim != p->ndim || p->ndim > 2 ||
		    (p->ndim == 2 && q->t->shape[1] != p->shape[1]))
			return weft_error_set(WEFT_ERR_SHAPE, "%s: tensor '%s' has shape %s but its "
					      "rows go into '%s' %s, which needs %lld columns; does "
					      "the model config (n_embd) match the checkpoint's?",
					      c->paths[q->file], q->t->name,
					      shape_of(q->t, a, sizeof(a)), p->name,
					      weft_shape_str(p, b, sizeof(b)),
					      (long long)p->shape[p->ndim - 1]);
		rows += q->t->shape[0];
	}
	if (rows != p->shape[0] || (s->part != 0))
		return weft_error_set(WEFT_ERR_SHAPE, "%s: the %d tensors stacked into '%s' %s "
				      "(starting with '%s' %s) have %lld rows in all, not %lld; "
				      "do model.n_head, n_kv_head and intermediate_size match the "
				      "checkpoint's config.json?", c->path, k, p->name,
				      weft_shape_str(p, b, sizeof(b)), s->t->name,
				      shape_of(s->t, a, sizeof(a)), (long long)rows,
				      (long long)p->shape[0]);
	return WEFT_OK;
}

/* The stacked sources of p, in part order, into c->buf, then into p. */
static weft_status copy_rows(ckpt *c, weft_tensor *p)
{
	size_t at = 0;
	weft_status st = WEFT_OK;
	src *q;

	for (int k = 0; !st && (q = find_part(c, p->name, k)); k++) {
		st = read_into(c, q, c->buf + at);
		at += (size_t)q->bytes;
	}
	return st ? st : weft_tensor_copy_from_host(p, c->buf, at);
}

/* The model's tensors come from the checkpoint's, with nanoGPT's tied
 * head: a file holding lm_head.weight without transformer.wte.weight
 * (safetensors' save_model keeps one name of a shared tensor) gives the
 * embedding from the head; one holding both must hold the same values.
 * *wte_src is where the embedding comes from. */
static weft_status tie_head(const weft_model *m, ckpt *c, src **wte_src)
{
	src *head = find_src(c, "lm_head.weight"), *wte = find_src(c, "transformer.wte.weight");
	size_t bytes;
	void *copy;
	weft_status st;
	char a[160];

	*wte_src = wte;
	if (!head || m->cls != WEFT_MODEL_GPT || !m->wte || m->head_w)
		return WEFT_OK;
	head->used = 1;
	if (!wte) {
		*wte_src = head;
		return WEFT_OK;
	}
	bytes = (size_t)(head->t->end - head->t->begin);
	head->bytes = wte->bytes = bytes;
	if (head->t->dtype == wte->t->dtype && bytes == (size_t)(wte->t->end - wte->t->begin)) {
		if (!(c->buf = malloc(bytes ? bytes : 1)) || !(copy = malloc(bytes ? bytes : 1)))
			return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory comparing the "
					      "head with the embedding", c->path);
		st = read_src(c, head);
		memcpy(copy, c->buf, bytes);
		if (!st)
			st = read_src(c, wte);
		if (!st && !memcmp(copy, c->buf, bytes)) {
			free(copy);
			free(c->buf);
			c->buf = NULL;
			return WEFT_OK;
		}
		free(copy);
		free(c->buf);
		c->buf = NULL;
		if (st)
			return st;
	}
	if (c->family && !c->hf.tied)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: config.json has "
				      "\"tie_word_embeddings\": false and 'lm_head.weight' differs "
				      "from 'transformer.wte.weight', but weft's GPT ties its head "
				      "to the embedding (as GPT-2 and nanoGPT do); an untied head "
				      "cannot be loaded into it", c->path);
	return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: 'lm_head.weight' (%s %s) differs from "
			      "'transformer.wte.weight', but this model ties them (nanoGPT's "
			      "weight tying); save the file from a tied model or drop "
			      "lm_head.weight", c->paths[head->file], weft_dtype_name(head->t->dtype),
			      shape_of(head->t, a, sizeof(a)));
}

/* The one source of parameter p, checked: present, same dtype, and the
 * shape weft's layout needs; with `crop`, more rows than p has are
 * accepted and the first p->shape[0] are read. */
static weft_status check_param(ckpt *c, const weft_tensor *p, src *s, int crop)
{
	const char *file = s ? c->paths[s->file] : c->path;
	char a[160], b[160];

	if (!s)
		return weft_error_set(WEFT_ERR_NOT_FOUND, "%s: parameter '%s' %s is missing from "
				      "the %s; was it saved from a different model or config?",
				      c->n_files == 1 ? c->paths[0] : c->path, p->name,
				      weft_shape_str(p, a, sizeof(a)),
				      c->n_files == 1 ? "file" : "checkpoint's files");
	s->used = 1;
	s->bytes = s->t->end - s->t->begin;
	if ((int32_t)s->t->dtype != p->dtype)
		return weft_error_set(WEFT_ERR_DTYPE, "%s: tensor '%s' is %s in the file but the "
				      "model's parameter is %s; convert the file to %s (in PyTorch: "
				      "model.float() before saving)", file, s->t->name,
				      weft_dtype_name(s->t->dtype),
				      weft_dtype_name((weft_dtype)p->dtype),
				      weft_dtype_name((weft_dtype)p->dtype));
	if (s->how == NN_HF_TRANSPOSE ? transposed_shape(s->t, p) : same_shape(s->t, p))
		return WEFT_OK;
	if (crop && s->how == NN_HF_COPY && s->t->ndim == 2 && p->ndim == 2 &&
	    s->t->shape[1] == p->shape[1] && s->t->shape[0] > p->shape[0]) {
		s->bytes = weft_tensor_nbytes(p);
		return WEFT_OK;
	}
	shape_of(s->t, a, sizeof(a));
	weft_shape_str(p, b, sizeof(b));
	if (s->how == NN_HF_COPY && transposed_shape(s->t, p))
		return weft_error_set(WEFT_ERR_SHAPE, "%s: tensor '%s' has shape %s in the file but "
				      "the model expects %s: it looks transposed, as a Hugging Face "
				      "GPT-2 checkpoint stores its Conv1D weights ([in, out]); give "
				      "model.init_from the directory holding this file and its "
				      "config.json, and weft transposes them", file, s->t->name, a, b);
	if (s->how == NN_HF_TRANSPOSE && same_shape(s->t, p))
		return weft_error_set(WEFT_ERR_SHAPE, "%s: tensor '%s' has shape %s, weft's own "
				      "[out, in] layout, but config.json says this is a "
				      "transformers %s whose Conv1D weights are [in, out] (%s "
				      "expected); was a nanoGPT or weft file put in a transformers "
				      "directory? give model.init_from the file itself", file,
				      s->t->name, a, c->family->architecture,
				      weft_shape_str(&(weft_tensor){ .ndim = 2,
						     .shape = { p->shape[1], p->shape[0] } },
						     b, sizeof(b)));
	return weft_error_set(WEFT_ERR_SHAPE, "%s: tensor '%s' has shape %s in the file but the "
			      "model expects %s; does the model config (n_embd, n_layer, "
			      "vocab_size, block_size) match the one the file was saved with?",
			      file, s->t->name, a, b);
}

/* s's bytes, in weft's layout, into p. */
static weft_status copy_param(ckpt *c, weft_tensor *p, const src *s)
{
	size_t bytes = (size_t)s->bytes;
	weft_status st = read_src(c, s);

	if (st)
		return st;
	if (s->how == NN_HF_TRANSPOSE) {
		/* [rows, cols] in the file: element (r, k) goes to (k, r) */
		int64_t rows = s->t->shape[0], cols = s->t->shape[1];
		size_t es = weft_dtype_size(s->t->dtype);

		for (int64_t r = 0; r < rows; r++)
			for (int64_t k = 0; k < cols; k++)
				memcpy(c->tbuf + ((size_t)(k * rows + r)) * es,
				       c->buf + ((size_t)(r * cols + k)) * es, es);
		return weft_tensor_copy_from_host(p, c->tbuf, bytes);
	}
	return weft_tensor_copy_from_host(p, c->buf, bytes);
}

weft_status weft_model_load_safetensors(weft_model *m, const char *path)
{
	return m->ops->load ? m->ops->load(m, path) : nn_model_load_file(m, path);
}

weft_status nn_model_load_file(weft_model *m, const char *path)
{
	size_t n = weft_params_count(m->params), most = 1, most_t = 1;
	ckpt c = { 0 };
	src **from = NULL, *wte = NULL;
	char a[160];
	weft_status st;

	if ((st = ckpt_open(m, path, &c)) || (st = tie_head(m, &c, &wte)))
		goto out_close;
	if (!(from = calloc(n ? n : 1, sizeof(*from)))) {
		st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", path);
		goto out_close;
	}
	for (size_t i = 0; i < n; i++) {
		weft_tensor *p = weft_params_at(m->params, i);
		src *s = p == m->wte ? wte : find_src(&c, p->name);

		if (s && s->how == NN_HF_ROWS) {
			if ((st = check_rows(&c, p, find_part(&c, p->name, 0) ?
					     find_part(&c, p->name, 0) : s)))
				goto out_close;
			s = find_part(&c, p->name, 0);
		} else if ((st = check_param(&c, p, s, c.family && p == m->wpe))) {
			goto out_close;
		}
		from[i] = s;
		if ((size_t)s->bytes > most)
			most = (size_t)s->bytes;
		if (s->how == NN_HF_ROWS && weft_tensor_nbytes(p) > most)
			most = weft_tensor_nbytes(p); /* the stacked parts */
		if (s->how == NN_HF_TRANSPOSE && (size_t)s->bytes > most_t)
			most_t = (size_t)s->bytes;
	}
	for (size_t i = 0; i < c.n_srcs; i++)
		if (!c.srcs[i].used) {
			st = weft_error_set(WEFT_ERR_INVALID_ARG, "%s: the checkpoint holds tensor "
					    "'%s' %s, which this model does not have (its %zu "
					    "parameters start with '%s'); was it saved from a "
					    "different model or config?", c.paths[c.srcs[i].file],
					    c.srcs[i].t->name, shape_of(c.srcs[i].t, a, sizeof(a)), n,
					    n ? weft_params_at(m->params, 0)->name : "");
			goto out_close;
		}
	c.buf = malloc(most);
	c.tbuf = malloc(most_t);
	if (!c.buf || !c.tbuf) {
		st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory for a tensor of %zu bytes",
				    path, most);
		goto out_close;
	}
	for (size_t i = 0; i < n && !st; i++)
		st = from[i]->how == NN_HF_ROWS ? copy_rows(&c, weft_params_at(m->params, i)) :
						  copy_param(&c, weft_params_at(m->params, i), from[i]);
out_close:
	free(from);
	ckpt_close(&c);
	return st;
}
