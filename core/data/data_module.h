/* data/data_module.h - the `data:` section of a config, built into loaders.
 *
 * Like a LightningDataModule: it owns the training and validation data for
 * this rank and hands out batch sources the trainer wraps in loaders. The
 * keys are documented in docs/config.md, section "data".
 */
#ifndef WEFT_DATA_DATA_MODULE_H
#define WEFT_DATA_DATA_MODULE_H

#include <stdint.h>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "weft/config.h"
#include "weft/status.h"

typedef enum weft_data_kind {
	WEFT_DATA_CLASSIFICATION = 0, /* x float32 (B, shape...), y int32 (B) */
	WEFT_DATA_LM = 1              /* x, y int32 (B, T) */
} weft_data_kind;

/* Where this process stands; the data layer needs nothing else of the run. */
typedef struct weft_data_env {
	int64_t world;    /* ranks that split the data (data-parallel size) */
	int64_t rank;     /* this rank among them */
	uint64_t seed;    /* seed_everything; data.seed overrides it */
} weft_data_env;

typedef struct weft_data_module {
	weft_data_kind kind;
	const char *class_name;     /* "fashion_mnist", "idx", "npy", "text", "tokens" */
	int64_t batch_size;         /* per rank */
	int64_t prefetch;           /* batches prepared ahead; 0: no loader thread */
	/* classification */
	int input_ndim;
	int64_t input_shape[WEFT_DATA_MAX_DIMS];
	int64_t num_classes;
	/* language model */
	int64_t block_size;
	int64_t vocab_size;
	/* sources (val.ctx is NULL when there is no validation data) */
	weft_batch_source train;
	weft_batch_source val;
	int val_is_test;            /* the validation source is the dataset's own test
				     * split (fashion_mnist's t10k files), not data
				     * held out for validation */
	int64_t train_examples;     /* whole dataset, all ranks (classification) */
	int64_t val_examples;       /* or tokens (LM) */
	/* storage, internal */
	weft_dataset train_ds, val_ds;
	weft_tokens all_tokens, all_val_tokens, train_tokens, val_tokens;
	weft_class_source train_cls, val_cls;
	weft_lm_source train_lm, val_lm;
} weft_data_module;

/* Reads the `data` mapping (marking every key it reads), loads the data,
 * and sets up this rank's sources. Free with weft_data_module_free.
 * Errors: WEFT_ERR_CONFIG with file:line:col for a wrong key value or a
 * missing required key; the loaders' errors (WEFT_ERR_NOT_FOUND naming the
 * file and the Debian package to install, WEFT_ERR_CORRUPT, ...) prefixed
 * with the config location of the key that named the file. */
weft_status weft_data_module_from_config(const weft_cfg *data, const weft_data_env *env,
					 weft_data_module **out);

/* A loader over the training (val = 0) or validation (val = 1) source with
 * the module's prefetch. Errors: WEFT_ERR_NOT_FOUND for val without
 * validation data; those of weft_loader_create. */
weft_status weft_data_module_loader(weft_data_module *m, int val, weft_loader **out);

/* Checks once, at load, that every token id (LM) or class label
 * (classification) is below `limit`, the model's vocabulary size or class
 * count, instead of failing when a batch holding a bad one is drawn, maybe
 * hours in. Labels equal to `ignore_index` pass. `limit_name` names the
 * model key to raise ("model.vocab_size"). A pass over the labels; over the
 * tokens only when the largest id (known from loading) is too large.
 * Errors: WEFT_ERR_CONFIG naming the file, the offending value, its
 * position, the limit and the fix. */
weft_status weft_data_module_check_ids(const weft_data_module *m, int64_t limit,
				       int64_t ignore_index, const char *limit_name);

/* Frees everything; NULL is ignored. Loaders made from it must be
 * destroyed first. */
void weft_data_module_free(weft_data_module *m);

#endif /* WEFT_DATA_DATA_MODULE_H */
