/* The data section of the config -> datasets, samplers and sources. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_module.h"

/* Fashion-MNIST's pixel mean and standard deviation over the training set
 * (values in [0, 1]), the usual Normalize((0.2860,), (0.3530,)). */
#define FMNIST_MEAN 0.2860
#define FMNIST_STD 0.3530

enum { C_FASHION_MNIST, C_IDX, C_NPY, C_TEXT, C_TOKENS };

static const char *const classes[] = { "fashion_mnist", "idx", "npy", "text", "tokens", NULL };

/* Prefixes the current error with where `key` was written. */
static weft_status at(weft_status st, const weft_cfg *data, const char *key)
{
	char where[256], path[256];
	const weft_cfg *node = weft_cfg_get(data, key);

	if (!node)
		node = data;
	return weft_error_wrap(st, "%s: %s", weft_cfg_where(node, where, sizeof(where)),
			       weft_cfg_path(node, path, sizeof(path)));
}

/* An optional string key; NULL when absent. */
static weft_status opt_str(const weft_cfg *data, const char *key, const char **out)
{
	return weft_cfg_str(data, key, NULL, out);
}

static weft_status req_str(const weft_cfg *data, const char *key, const char *cls,
			   const char **out)
{
	weft_status st = weft_cfg_str(data, key, NULL, out);

	if (!st && !*out)
		st = weft_cfg_error(data, "needs '%s' for class %s", key, cls);
	return st;
}

static weft_status load_classification(weft_data_module *m, const weft_cfg *data, int cls)
{
	weft_status st = WEFT_OK;
	const char *a = NULL, *b = NULL, *va = NULL, *vb = NULL;
	int have_val_files = 0;

	switch (cls) {
	case C_FASHION_MNIST:
		st = weft_cfg_str(data, "path", WEFT_FASHION_MNIST_DIR, &a);
		if (st)
			return st;
		st = weft_fashion_mnist_load(a, "train", &m->train_ds);
		if (!st)
			st = weft_fashion_mnist_load(a, "test", &m->val_ds);
		if (st)
			return at(st, data, "path");
		have_val_files = 1;
		m->val_is_test = 1;
		break;
	case C_IDX:
	case C_NPY: {
		const char *kx = cls == C_IDX ? "images" : "x", *ky = cls == C_IDX ? "labels" : "y";
		const char *kvx = cls == C_IDX ? "val_images" : "val_x";
		const char *kvy = cls == C_IDX ? "val_labels" : "val_y";

		if ((st = req_str(data, kx, classes[cls], &a)) ||
		    (st = req_str(data, ky, classes[cls], &b)) || (st = opt_str(data, kvx, &va)) ||
		    (st = opt_str(data, kvy, &vb)))
			return st;
		if (!va != !vb)
			return weft_cfg_error(data, "'%s' and '%s' go together: give both or "
					      "neither", kvx, kvy);
		st = cls == C_IDX ? weft_dataset_from_idx(a, b, &m->train_ds)
				  : weft_dataset_from_npy(a, b, &m->train_ds);
		if (st)
			return at(st, data, kx);
		if (va) {
			st = cls == C_IDX ? weft_dataset_from_idx(va, vb, &m->val_ds)
					  : weft_dataset_from_npy(va, vb, &m->val_ds);
			if (st)
				return at(st, data, kvx);
			have_val_files = 1;
		}
		break;
	}
	}
	{
		double vf;
		int normalize;
		double mean, std;

		st = weft_cfg_float(data, "val_fraction", 0.0, &vf);
		if (st)
			return st;
		if (!(vf >= 0 && vf < 1))
			return weft_cfg_error(weft_cfg_get(data, "val_fraction"),
					      "must be in [0, 1), got %g", vf);
		if (vf > 0) {
			/* The tail of the training set replaces any validation files. */
			int64_t count = (int64_t)((double)m->train_ds.n * vf);

			if (count < 1)
				return weft_cfg_error(weft_cfg_get(data, "val_fraction"),
						      "%g of %" PRId64 " examples is no example "
						      "at all; raise it", vf, m->train_ds.n);
			weft_dataset_free(&m->val_ds);
			m->val_is_test = 0;
			st = weft_dataset_split_tail(&m->train_ds, count, &m->val_ds);
			if (st)
				return st;
			have_val_files = 1;
		}
		st = weft_cfg_bool(data, "normalize", 0, &normalize);
		if (!st)
			st = weft_cfg_float(data, "mean", cls == C_FASHION_MNIST ? FMNIST_MEAN : 0.0,
					    &mean);
		if (!st)
			st = weft_cfg_float(data, "std", cls == C_FASHION_MNIST ? FMNIST_STD : 1.0,
					    &std);
		if (st)
			return st;
		if (!(std > 0))
			return weft_cfg_error(weft_cfg_get(data, "std"), "must be > 0, got %g", std);
		if (normalize) {
			weft_dataset_normalize(&m->train_ds, mean, std);
			if (have_val_files)
				weft_dataset_normalize(&m->val_ds, mean, std);
		}
	}
	m->kind = WEFT_DATA_CLASSIFICATION;
	m->input_ndim = m->train_ds.ndim;
	memcpy(m->input_shape, m->train_ds.shape, sizeof(m->input_shape));
	m->num_classes = m->train_ds.num_classes;
	m->train_examples = m->train_ds.n;
	if (have_val_files) {
		if (m->val_ds.example_numel != m->train_ds.example_numel)
			return weft_cfg_error(data, "validation examples have %" PRId64 " values "
					      "each but training examples have %" PRId64 " ('%s' vs "
					      "'%s')", m->val_ds.example_numel,
					      m->train_ds.example_numel, m->val_ds.source,
					      m->train_ds.source);
		if (m->val_ds.num_classes > m->num_classes)
			m->num_classes = m->val_ds.num_classes;
		m->val_examples = m->val_ds.n;
	}
	return WEFT_OK;
}

static weft_status load_lm(weft_data_module *m, const weft_cfg *data, int cls)
{
	const weft_cfg *paths_node;
	const char *path = NULL, *val_path = NULL;
	double vf;
	weft_status st;

	st = weft_cfg_float(data, "val_fraction", 0.1, &vf);
	if (st)
		return st;
	if (!(vf >= 0 && vf < 1))
		return weft_cfg_error(weft_cfg_get(data, "val_fraction"),
				      "must be in [0, 1), got %g", vf);
	if (cls == C_TEXT) {
		const char *list[64];
		size_t n = 0;

		paths_node = weft_cfg_get(data, "paths");
		if (!paths_node)
			return weft_cfg_error(data, "needs 'paths' (a file, a glob, or a list of "
					      "them) for class text");
		if (weft_cfg_kind_of(paths_node) == WEFT_CFG_SEQ) {
			n = weft_cfg_size(paths_node);
			if (n == 0 || n > 64)
				return weft_cfg_error(paths_node, "must list 1 to 64 paths, got %zu",
						      n);
			for (size_t i = 0; i < n; i++) {
				st = weft_cfg_as_str(weft_cfg_at(paths_node, i), &list[i]);
				if (st)
					return st;
			}
		} else {
			st = weft_cfg_as_str(paths_node, &list[0]);
			if (st)
				return st;
			n = 1;
		}
		st = weft_tokens_from_text(list, n, &m->all_tokens);
		if (st)
			return at(st, data, "paths");
		st = opt_str(data, "tokenizer", &path);
		if (!st && path)
			st = weft_tokens_tokenize(&m->all_tokens, path);
		if (st)
			return at(st, data, "tokenizer");
	} else {
		if ((st = req_str(data, "path", "tokens", &path)) ||
		    (st = opt_str(data, "val_path", &val_path)))
			return st;
		st = weft_tokens_from_bin(path, &m->all_tokens);
		if (st)
			return at(st, data, "path");
		if (val_path) {
			st = weft_tokens_from_bin(val_path, &m->all_val_tokens);
			if (st)
				return at(st, data, "val_path");
		}
	}
	if (m->all_val_tokens.data) {
		m->train_tokens = m->all_tokens;
		m->train_tokens.owned = NULL;
		m->train_tokens.map = NULL;
		m->val_tokens = m->all_val_tokens;
		m->val_tokens.owned = NULL;
		m->val_tokens.map = NULL;
	} else {
		st = weft_tokens_split(&m->all_tokens, vf, &m->train_tokens, &m->val_tokens);
		if (st)
			return st;
	}
	m->kind = WEFT_DATA_LM;
	m->vocab_size = m->all_tokens.vocab;
	if (m->all_val_tokens.vocab > m->vocab_size)
		m->vocab_size = m->all_val_tokens.vocab;
	m->train_examples = m->train_tokens.n;
	m->val_examples = m->val_tokens.n;
	return WEFT_OK;
}

static weft_status setup_sources(weft_data_module *m, const weft_cfg *data,
				 const weft_data_env *env, uint64_t seed)
{
	weft_status st;
	int shuffle, drop_last;

	if ((st = weft_cfg_bool(data, "shuffle", 1, &shuffle)) ||
	    (st = weft_cfg_bool(data, "drop_last", 0, &drop_last)))
		return st;
	if (m->kind == WEFT_DATA_CLASSIFICATION) {
		st = weft_class_source_init(&m->train_cls, &m->train_ds, m->batch_size, env->world,
					    env->rank, shuffle, seed, drop_last);
		if (st)
			return at(st, data, "batch_size");
		m->train = weft_class_source_iface(&m->train_cls);
		if (m->val_examples > 0) {
			/* Validation: in order, every example (padded as PyTorch does). */
			st = weft_class_source_init(&m->val_cls, &m->val_ds, m->batch_size,
						    env->world, env->rank, 0, seed, 0);
			if (st)
				return at(st, data, "batch_size");
			m->val = weft_class_source_iface(&m->val_cls);
		}
		return WEFT_OK;
	}
	{
		static const char *const modes[] = { "random", "sequential", NULL };
		int64_t block, per_epoch, val_batches;
		int mode;

		if ((st = weft_cfg_int(data, "block_size", -1, &block)) ||
		    (st = weft_cfg_choice(data, "sampling", modes, "random", &mode)) ||
		    (st = weft_cfg_int(data, "batches_per_epoch", 0, &per_epoch)) ||
		    (st = weft_cfg_int(data, "val_batches", 0, &val_batches)))
			return st;
		if (block == -1)
			return weft_cfg_error(data, "needs 'block_size' (the context length T) for "
					      "class %s", m->class_name);
		if (block < 1)
			return weft_cfg_error(weft_cfg_get(data, "block_size"),
					      "must be >= 1, got %" PRId64, block);
		if (per_epoch < 0 || val_batches < 0)
			return weft_cfg_error(weft_cfg_get(data, per_epoch < 0 ? "batches_per_epoch"
									       : "val_batches"),
					      "must be >= 0 (0: no cap)");
		m->block_size = block;
		st = weft_lm_source_init(&m->train_lm, &m->train_tokens, m->batch_size, block,
					 env->world, env->rank, seed, mode == 0, per_epoch);
		if (st)
			return at(st, data, "block_size");
		m->train = weft_lm_source_iface(&m->train_lm);
		if (m->val_tokens.n > block) {
			st = weft_lm_source_init(&m->val_lm, &m->val_tokens, m->batch_size, block,
						 env->world, env->rank, seed, 0, val_batches);
			if (st)
				return at(st, data, "block_size");
			m->val = weft_lm_source_iface(&m->val_lm);
		}
	}
	return WEFT_OK;
}

weft_status weft_data_module_from_config(const weft_cfg *data, const weft_data_env *env,
					 weft_data_module **out)
{
	weft_data_module *m;
	weft_status st;
	int64_t seed, workers, prefetch;
	int cls;

	*out = NULL;
	if (!data || weft_cfg_kind_of(data) != WEFT_CFG_MAP)
		return weft_cfg_error(data, "the 'data' section must be a mapping with at least "
				      "'class' (one of fashion_mnist, idx, npy, text, tokens)");
	m = calloc(1, sizeof(*m));
	if (!m)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory reading the data section");
	if ((st = weft_cfg_choice(data, "class", classes, NULL, &cls)) ||
	    (st = weft_cfg_int(data, "batch_size", 32, &m->batch_size)) ||
	    (st = weft_cfg_int(data, "num_workers", 1, &workers)) ||
	    (st = weft_cfg_int(data, "prefetch", 2, &prefetch)) ||
	    (st = weft_cfg_int(data, "seed", (int64_t)env->seed, &seed)))
		goto out_free;
	m->class_name = classes[cls];
	if (m->batch_size < 1) {
		st = weft_cfg_error(weft_cfg_get(data, "batch_size"), "must be >= 1, got %" PRId64,
				    m->batch_size);
		goto out_free;
	}
	if (workers < 0) {
		st = weft_cfg_error(weft_cfg_get(data, "num_workers"), "must be >= 0, got %" PRId64,
				    workers);
		goto out_free;
	}
	if (prefetch < 1 || prefetch > 16) {
		st = weft_cfg_error(weft_cfg_get(data, "prefetch"), "must be 1 to 16 batches, got %"
				    PRId64, prefetch);
		goto out_free;
	}
	m->prefetch = workers > 0 ? prefetch : 0;
	st = cls == C_TEXT || cls == C_TOKENS ? load_lm(m, data, cls)
					       : load_classification(m, data, cls);
	if (st)
		goto out_free;
	st = setup_sources(m, data, env, (uint64_t)seed);
	if (st)
		goto out_free;
	*out = m;
	return WEFT_OK;
out_free:
	weft_data_module_free(m);
	return st;
}

weft_status weft_data_module_loader(weft_data_module *m, int val, weft_loader **out)
{
	const weft_batch_source *src = val ? &m->val : &m->train;

	*out = NULL;
	if (!src->ctx)
		return weft_error_set(WEFT_ERR_NOT_FOUND, "data class %s has no validation data "
				      "here; set data.val_fraction (or the val_* paths)",
				      m->class_name);
	return weft_loader_create(src, (int)m->prefetch, out);
}

static weft_status check_tokens(const weft_tokens *t, int64_t limit, const char *limit_name)
{
	if (!t->data || t->vocab <= limit)
		return WEFT_OK;
	for (int64_t i = 0; i < t->n; i++) {
		int64_t id = weft_tokens_at(t, i);

		if (id >= limit)
			return weft_error_set(WEFT_ERR_CONFIG, "%s '%s' holds token id %" PRId64
					      " at position %" PRId64 " (of %" PRId64 "), but the "
					      "model's vocabulary has %" PRId64 " ids (%s); its ids "
					      "go up to %" PRId64 ": set %s to at least %" PRId64 " or "
					      "tokenize with the model's vocabulary",
					      t->elem_bytes == 1 ? "text" : "token file", t->source, id,
					      i, t->n, limit, limit_name, t->vocab - 1, limit_name,
					      t->vocab);
	}
	return WEFT_OK;
}

static weft_status check_labels(const weft_dataset *ds, int64_t limit, int64_t ignore_index,
				const char *limit_name)
{
	if (!ds->y)
		return WEFT_OK;
	for (int64_t i = 0; i < ds->n; i++) {
		int64_t y = ds->y[i];

		if (y != ignore_index && (y < 0 || y >= limit))
			return weft_error_set(WEFT_ERR_CONFIG, "labels '%s' hold class %" PRId64 " at "
					      "entry %" PRId64 ", but the model has %" PRId64 " classes "
					      "(%s, labels 0 to %" PRId64 "); set %s to at least %"
					      PRId64 " or fix the labels",
					      ds->labels_source[0] ? ds->labels_source : ds->source, y,
					      ds->first + i, limit, limit_name, limit - 1, limit_name,
					      ds->num_classes);
	}
	return WEFT_OK;
}

weft_status weft_data_module_check_ids(const weft_data_module *m, int64_t limit,
				       int64_t ignore_index, const char *limit_name)
{
	weft_status st;

	if (m->kind == WEFT_DATA_LM) {
		/* the train and val views are slices of these */
		st = check_tokens(&m->all_tokens, limit, limit_name);
		if (!st)
			st = check_tokens(&m->all_val_tokens, limit, limit_name);
		return st;
	}
	st = check_labels(&m->train_ds, limit, ignore_index, limit_name);
	if (!st)
		st = check_labels(&m->val_ds, limit, ignore_index, limit_name);
	return st;
}

void weft_data_module_free(weft_data_module *m)
{
	if (!m)
		return;
	weft_class_source_free(&m->train_cls);
	weft_class_source_free(&m->val_cls);
	weft_dataset_free(&m->train_ds);
	weft_dataset_free(&m->val_ds);
	weft_tokens_free(&m->all_tokens);
	weft_tokens_free(&m->all_val_tokens);
	free(m);
}
