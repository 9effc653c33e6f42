/* nn/safetensors.h - reading and writing the safetensors format.
 *
 * A file is: 8 bytes, the little-endian u64 length N of the header; N bytes
 * of JSON, an object mapping each tensor name to {"dtype", "shape",
 * "data_offsets": [begin, end]} plus an optional "__metadata__" object of
 * string values; then the data, little-endian, row-major. Offsets are
 * relative to the start of the data; the tensors must cover the data with
 * no holes and no overlaps, and end - begin must be the tensor's bytes.
 * weft pads the header with spaces to a multiple of 8 bytes (allowed by
 * the format) so the data starts aligned.
 *
 * The reader checks all of that and reports the first violation with the
 * path and the tensor; it never trusts a length from the file before
 * checking it against the file's size. A shape's bytes must fit in 2^63
 * (with zero dims left out, so every partial product fits an int64) and
 * names are at most WEFT_ST_MAX_NAME bytes. The loader (weft_st_open) and
 * the checkpoint tools (weft_st_open_header) share this one check.
 */
#ifndef WEFT_NN_SAFETENSORS_H
#define WEFT_NN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "weft/status.h"
#include "weft/tensor.h"

/* Headers past this many bytes are refused (the format's own limit). */
#define WEFT_ST_MAX_HEADER (100u * 1000u * 1000u)

/* Tensor names longer than this many bytes are refused, read or written. */
#define WEFT_ST_MAX_NAME 4096

/* One tensor of an open file. */
typedef struct weft_st_tensor {
	char *name;
	weft_dtype dtype;
	int32_t ndim;
	int64_t shape[WEFT_MAX_DIMS];
	uint64_t begin, end;  /* byte offsets into the data section */
	const void *data;     /* into the file's buffer; not aligned in general */
} weft_st_tensor;

/* An open file, read whole into memory (WEFT_MEM_OTHER), or only its
 * header (weft_st_open_header: buf NULL, every tensor's data NULL). */
typedef struct weft_st_file {
	char *path;
	unsigned char *buf;
	size_t size;             /* of the whole file */
	uint64_t data_at;        /* the byte of the file where the data begins */
	weft_st_tensor *tensors; /* in header order */
	size_t count;
	char *format;            /* __metadata__.format, or NULL */
	char **meta_keys;        /* every __metadata__ pair, in header order */
	char **meta_values;
	size_t n_meta;
} weft_st_file;

/* Reads and checks `path`. *out is a new file; close with weft_st_close.
 * Errors: WEFT_ERR_NOT_FOUND / WEFT_ERR_IO naming the path and reason;
 * WEFT_ERR_CORRUPT naming the path and what is wrong (truncated file,
 * header size, JSON syntax with its byte position, an unknown dtype, a
 * shape or offsets that do not fit, holes or overlaps); WEFT_ERR_NOMEM. */
weft_status weft_st_open(const char *path, weft_st_file **out);

/* As weft_st_open, with the same checks against the file's size, but reads
 * only the header: for tools that stream the data by ranges (weft ckpt).
 * f->buf and each tensor's data are NULL; tensor t's bytes are at file
 * offset f->data_at + t->begin. Same errors as weft_st_open. */
weft_status weft_st_open_header(const char *path, weft_st_file **out);

/* Frees everything; NULL is ignored. */
void weft_st_close(weft_st_file *f);

/* The tensor called `name`, or NULL. */
const weft_st_tensor *weft_st_find(const weft_st_file *f, const char *name);

/* The __metadata__ value of `key` (borrowed from f), or NULL. */
const char *weft_st_meta(const weft_st_file *f, const char *key);

/* A tensor to write; everything borrowed. `data` is host memory of
 * numel(shape) * dtype size bytes. */
typedef struct weft_st_entry {
	const char *name;
	weft_dtype dtype;
	int32_t ndim;
	const int64_t *shape;
	const void *data;
} weft_st_entry;

/* The pieces of a safetensors header, for writers that build their own
 * (weft_st_write, `weft ckpt export`): weft_st_header_begin opens the
 * top-level object on `w` and writes {"__metadata__":{"format":"pt"}};
 * weft_st_header_tensor writes one tensor's entry, its bytes at
 * [begin, end) of the data section. The caller closes the object with
 * weft_json_end_object and finishes the writer (base/json.h). Cannot
 * fail: the writer records its own out-of-memory for weft_json_finish. */
struct weft_json_writer;
void weft_st_header_begin(struct weft_json_writer *w, const char *const *meta, size_t n_meta);
void weft_st_header_tensor(struct weft_json_writer *w, const char *name, weft_dtype dtype,
			   int32_t ndim, const int64_t *shape, int64_t begin, int64_t end);

/* The __metadata__ pairs weft_model_save_safetensors writes for a model
 * besides "format": for a GPT its shape (weft.model, weft.n_layer,
 * weft.n_head, weft.n_embd, weft.vocab_size, weft.block_size) and, when
 * its choices are not GPT-2's, those too (weft.norm, weft.rope_theta, ...:
 * nn_hf_arch_meta_put in nn/hf.h), which `weft ckpt export --format hf`
 * reads; none (n 0) for other classes. pairs[2i] -> pairs[2i + 1] for
 * i < n; the values live in v. The streamed save (train/model_stream.c)
 * writes the same, so both files are equal. */
#define WEFT_MODEL_META_MAX 24
typedef struct weft_model_meta {
	char v[WEFT_MODEL_META_MAX][32];
	const char *pairs[2 * WEFT_MODEL_META_MAX];
	size_t n;
} weft_model_meta;
struct weft_model;
void weft_model_st_meta(const struct weft_model *m, weft_model_meta *out);

/* Writes entries[0..n) to `path` (created or truncated) with
 * {"__metadata__":{"format":"pt"}}, the header padded to a multiple of 8.
 * Blocking. Errors: WEFT_ERR_IO naming the path and reason;
 * WEFT_ERR_INVALID_ARG for a name that is empty or too long, or a
 * duplicate name; WEFT_ERR_NOMEM. */
weft_status weft_st_write(const char *path, const weft_st_entry *entries, size_t n);

/* As weft_st_write, with the n_meta string pairs meta[2i] -> meta[2i + 1]
 * in __metadata__ after "format" (a key "format", an empty key or a NULL is
 * WEFT_ERR_INVALID_ARG). */
weft_status weft_st_write_meta(const char *path, const char *const *meta, size_t n_meta,
			       const weft_st_entry *entries, size_t n);

#endif /* WEFT_NN_SAFETENSORS_H */
