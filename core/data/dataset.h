/* data/dataset.h - datasets held in host memory, and the files they come from.
 *
 * Two shapes of data cover weft's examples:
 *  - weft_dataset: n examples of a fixed feature shape (float32) with an
 *    optional int32 label each: Fashion-MNIST and other idx files, npy.
 *  - weft_tokens: one long stream of token ids: raw text as byte-level
 *    tokens (vocabulary 256), or token .bin files (nanoGPT's bare uint16
 *    array; llm.c's 1024-byte header + uint16 tokens, told apart by magic).
 * Example data is counted under WEFT_MEM_OTHER (weft/memory.h).
 */
#ifndef WEFT_DATA_DATASET_H
#define WEFT_DATA_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "weft/status.h"

#define WEFT_DATA_MAX_DIMS 6
#define WEFT_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct weft_dataset {
	int64_t n;                           /* examples */
	int ndim;                            /* dims of one example */
	int64_t shape[WEFT_DATA_MAX_DIMS];   /* one example's shape */
	int64_t example_numel;               /* product of shape */
	float *x;                            /* n * example_numel values (owned) */
	int32_t *y;                          /* n labels, or NULL (owned) */
	int64_t num_classes;                 /* 1 + largest label; 0 without labels */
	char source[512];                    /* the file(s), for messages */
	char labels_source[512];             /* the labels' file, or "" */
	int64_t first;                       /* the files' index of example 0 */
} weft_dataset;

/* Frees the arrays of a dataset and zeroes it; NULL is ignored. */
void weft_dataset_free(weft_dataset *ds);

/* Moves the last `count` examples of `ds` into a new dataset `tail`
 * (copies; `ds` shrinks to n - count). Used for a validation split.
 * Errors: WEFT_ERR_INVALID_ARG when count is not in [1, n - 1]. */
weft_status weft_dataset_split_tail(weft_dataset *ds, int64_t count, weft_dataset *tail);

/* Applies (x - mean) / std to every value. Errors: WEFT_ERR_INVALID_ARG
 * for std <= 0. */
weft_status weft_dataset_normalize(weft_dataset *ds, double mean, double std);

/* ---- idx (MNIST's format), plain or gzip-compressed --------------------- */

/* An idx file read whole: dims and the unsigned-byte payload. */
typedef struct weft_idx {
	int ndim;
	int64_t dims[WEFT_DATA_MAX_DIMS];
	uint8_t *data;                       /* product(dims) bytes (owned) */
	int64_t count;                       /* product(dims) */
} weft_idx;

/* Reads an idx file (`.gz` or not: zlib reads both) holding unsigned bytes
 * (type 0x08): magic 0x00 0x00 0x08 ndim, ndim big-endian uint32 sizes,
 * then the data. The data length must equal the product of the sizes.
 * Errors: WEFT_ERR_NOT_FOUND naming the path; WEFT_ERR_CORRUPT naming the
 * path and what is wrong (bad magic, truncated: "expected N bytes of data,
 * found M", trailing bytes, a gzip error); WEFT_ERR_UNSUPPORTED for other
 * element types (naming the type code). */
weft_status weft_idx_read(const char *path, weft_idx *out);

/* Frees an idx payload; NULL is ignored. */
void weft_idx_free(weft_idx *idx);

/* Builds a dataset from an images idx (N, d1, d2, ...) and an optional
 * labels idx (N): pixels become float32 value / 255 in [0, 1].
 * Errors: those of weft_idx_read; WEFT_ERR_SHAPE when the counts differ
 * (naming both files and counts). */
weft_status weft_dataset_from_idx(const char *images, const char *labels, weft_dataset *out);

/* Fashion-MNIST from `dir` (NULL: WEFT_FASHION_MNIST_DIR): split "train"
 * (60000) or "test" (10000), 28x28 images, 10 classes.
 * Errors: WEFT_ERR_NOT_FOUND naming the missing path and the fix: "install
 * the Debian package dataset-fashion-mnist (apt-get install
 * dataset-fashion-mnist)"; WEFT_ERR_INVALID_ARG for another split; the
 * errors of weft_dataset_from_idx. */
weft_status weft_fashion_mnist_load(const char *dir, const char *split, weft_dataset *out);

/* ---- npy ----------------------------------------------------------------- */

typedef enum weft_npy_dtype {
	WEFT_NPY_F4 = 0, WEFT_NPY_F8 = 1, WEFT_NPY_I4 = 2, WEFT_NPY_I8 = 3,
	WEFT_NPY_U1 = 4, WEFT_NPY_U2 = 5
} weft_npy_dtype;

typedef struct weft_npy {
	weft_npy_dtype dtype;
	int elem_bytes;
	int ndim;                            /* 0 for a scalar */
	int64_t shape[WEFT_DATA_MAX_DIMS];
	int64_t count;                       /* product of shape */
	void *data;                          /* count * elem_bytes, C order (owned) */
} weft_npy;

/* Reads a .npy file, format versions 1.0, 2.0 and 3.0, little-endian
 * '<f4' '<f8' '<i4' '<i8' '|u1' '<u2', C order.
 * Errors: WEFT_ERR_NOT_FOUND naming the path; WEFT_ERR_CORRUPT for a bad
 * magic, header or a data length that does not match the shape;
 * WEFT_ERR_UNSUPPORTED for fortran_order True (with the fix:
 * np.ascontiguousarray), big-endian or other dtypes (naming the descr). */
weft_status weft_npy_read(const char *path, weft_npy *out);

/* Frees an npy payload; NULL is ignored. */
void weft_npy_free(weft_npy *a);

/* Builds a dataset from features `x` (N, ...) converted to float32 and
 * optional labels `y` (N) of an integer dtype converted to int32.
 * Errors: those of weft_npy_read; WEFT_ERR_SHAPE when N differs or y is not
 * 1-D; WEFT_ERR_DTYPE for float labels or labels out of int32 range. */
weft_status weft_dataset_from_npy(const char *x, const char *y, weft_dataset *out);

/* ---- token streams ------------------------------------------------------ */

typedef struct weft_tokens {
	const void *data;       /* elem_bytes per token, little-endian */
	int elem_bytes;         /* 1 (text bytes), 2 (uint16 .bin) or 4 (uint32 .bin) */
	int64_t n;              /* tokens */
	int64_t vocab;          /* 256 for text; 1 + the largest id for .bin */
	int64_t max_at;         /* .bin: where the largest id first occurs */
	char source[512];
	/* ownership, internal: */
	void *owned;            /* weft_mem_alloc block, or NULL */
	void *map;              /* mmap'ed file, or NULL */
	size_t map_len;
} weft_tokens;

/* Token i of a stream (no bounds check). */
static inline uint32_t weft_tokens_at(const weft_tokens *t, int64_t i)
{
	switch (t->elem_bytes) {
	case 1: return ((const uint8_t *)t->data)[i];
	case 2: return ((const uint16_t *)t->data)[i];
	default: return ((const uint32_t *)t->data)[i];
	}
}

/* Concatenates the bytes of `n` files into one stream (vocabulary 256). A
 * path may be a glob pattern ("/usr/share/games/fortunes/[a-z]*" style), expanded
 * in sorted order. Errors: WEFT_ERR_NOT_FOUND naming the path or pattern
 * (and the Debian package fortunes-min for paths under
 * /usr/share/games/fortunes); WEFT_ERR_IO; WEFT_ERR_INVALID_ARG when the
 * files hold no bytes at all. */
weft_status weft_tokens_from_text(const char *const *paths, size_t n, weft_tokens *out);

/* Replaces a text stream's bytes (from weft_tokens_from_text) by their ids
 * under the byte-level BPE tokenizer.json at `tokenizer_path` (core/text):
 * uint16 ids when its vocabulary has at most 65536 ids, uint32 otherwise;
 * vocab becomes the tokenizer's. The text is cut into pieces that encode
 * apart to the same ids and encoded on up to 8 threads. No end-of-text
 * token is added (files are concatenated as bytes first).
 * Errors: those of weft_tokenizer_load (naming the file);
 * WEFT_ERR_INVALID_ARG when the text gives no tokens; WEFT_ERR_NOMEM. */
weft_status weft_tokens_tokenize(weft_tokens *t, const char *tokenizer_path);

/* Opens a token .bin file (memory-mapped, read-only): llm.c's format when
 * the first int32 is 20240520 (version 1, uint16 tokens) or 20240801
 * (version 7, uint32 tokens): a 256 x int32 header whose third entry is the
 * token count; otherwise nanoGPT's bare uint16 array. A first int32 that
 * is no magic but near one (a byte away from one, or a date-like
 * YYYYMMDD followed by a small version) is refused rather than read as
 * tokens, header and all.
 * Errors: WEFT_ERR_NOT_FOUND naming the path; WEFT_ERR_IO for a file that
 * is not regular (a FIFO); WEFT_ERR_CORRUPT naming the path and the
 * mismatch (odd size for uint16, header count vs file size, unknown llm.c
 * version, a near-magic naming the number found and the magics). */
weft_status weft_tokens_from_bin(const char *path, weft_tokens *out);

/* Splits `all` into views: the first (1 - val_fraction) of the tokens for
 * training, the rest for validation (as nanoGPT's prepare scripts do). The
 * views borrow `all`'s storage: free only `all`, after them.
 * Errors: WEFT_ERR_INVALID_ARG when val_fraction is not in [0, 1). */
weft_status weft_tokens_split(const weft_tokens *all, double val_fraction, weft_tokens *train,
			      weft_tokens *val);

/* Releases a stream's storage (a no-op for views); NULL is ignored. */
void weft_tokens_free(weft_tokens *t);

#endif /* WEFT_DATA_DATASET_H */
