/* `weft ckpt inspect|export|reshard DIR ...`: checkpoints made by weft fit
 * (core/train/checkpoint.c): model.safetensors (whole weights),
 * optimizer.bin (slots in global flat coordinates), trainer_state.json,
 * manifest.json.
 *
 *   inspect DIR                  manifest, step, strategy, world size,
 *                                optimizer slots, every tensor
 *
 * Every command first checks the checkpoint as the loader does (open_ckpt:
 * the manifest lists and matches every file read, model.safetensors passes
 * the reader's own check), so none describes, converts or crashes on a
 * file the loader would refuse.
 *   export DIR OUT [--optimizer] a consolidated safetensors file, streamed
 *                                tensor by tensor in 1 MiB pieces: the
 *                                weights, and with --optimizer each slot of
 *                                each parameter as "<name>.<slot>" (PyTorch's
 *                                state names), read from optimizer.bin by
 *                                ranges; no whole optimizer state is held;
 *                                and lm_head.weight (a copy of the tied
 *                                wte) so nanoGPT's strict loader accepts it
 *   export DIR OUTDIR --format hf [--n-head N]
 *                                config.json + model.safetensors in
 *                                transformers' GPT-2 layout (Conv1D weights
 *                                transposed) or Llama layout (q | k | v and
 *                                gate | up split by rows), by the choices
 *                                the weights' metadata records, one tensor
 *                                held at a time
 *   reshard DIR [--world-size N] weft's format is already global (every rank
 *                                saves its shards at their global flat
 *                                offsets), so any strategy and world size
 *                                loads it as it is: reshard checks the
 *                                checkpoint and says so, changing nothing. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "base/json.h"
#include "nn/hf.h"
#include "nn/safetensors.h"
#include "train/checkpoint_files.h"
#include "train/optim_state.h"
#include "weft/weft.h"

#define PIECE (1u << 20)

static void usage(FILE *out)
{
	fprintf(out, "usage: weft ckpt inspect DIR\n"
		"       weft ckpt export DIR OUT.safetensors [--optimizer]\n"
		"       weft ckpt export DIR OUTDIR --format hf [--n-head N]\n"
		"       weft ckpt reshard DIR [--world-size N]\n"
		"\ninspect lists what a checkpoint holds; export writes its weights (and with\n"
		"--optimizer every optimizer slot as <param>.<slot>) to one safetensors file,\n"
		"streaming tensor by tensor, with lm_head.weight (the tied head) as nanoGPT's\n"
		"strict load_state_dict wants it; --format hf writes OUTDIR/config.json and\n"
		"OUTDIR/model.safetensors that transformers' from_pretrained loads\n"
		"(GPT2LMHeadModel, or LlamaForCausalLM for an RMSNorm/RoPE/SwiGLU model;\n"
		"--n-head only for checkpoints that do not record it). reshard is not\n"
		"needed: weft saves optimizer state in global flat coordinates, so any strategy\n"
		"and world size resumes from any checkpoint as it is (reshard verifies it and\n"
		"changes nothing).\n");
}

/* A tensor's elements; the shared check (nn/safetensors.h) keeps every
 * partial product of a shape below 2^63. */
static int64_t numel_of(const weft_st_tensor *t)
{
	int64_t n = 1;

	for (int32_t d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	return n;
}

static const char *shape_of(const weft_st_tensor *t, char *buf, size_t len)
{
	weft_tensor tmp = { .ndim = t->ndim };

	memcpy(tmp.shape, t->shape, sizeof(tmp.shape));
	return weft_shape_str(&tmp, buf, len);
}

static int64_t json_int(const weft_json_value *js, const char *key)
{
	const weft_json_value *v = weft_json_get(js, key);

	return v && v->kind == WEFT_JSON_NUMBER && v->is_integer ? v->integer : -1;
}

static const char *json_str(const weft_json_value *js, const char *key)
{
	const weft_json_value *v = weft_json_get(js, key);

	return v && v->kind == WEFT_JSON_STRING ? v->string : "?";
}

/* The checkpoint `dir` checked as the loader checks it: the manifest
 * lists and matches every file read (train/checkpoint_files.h), the
 * trainer state is a JSON object, and model.safetensors passes the
 * loader's own check (weft_st_open_header: the same as weft_st_open,
 * reading only the header). *state and *model are new; free with
 * weft_json_free and weft_st_close. */
static weft_status open_ckpt(const char *dir, weft_json_value **state, weft_st_file **model)
{
	char path[4096];
	weft_status st = weft_checkpoint_verify(dir);

	*state = NULL;
	*model = NULL;
	if (st)
		return weft_error_wrap(st, "checkpoint '%s'", dir);
	snprintf(path, sizeof(path), "%s/" WEFT_CKPT_STATE, dir);
	if ((st = weft_json_parse_file(path, state)))
		return st;
	if ((*state)->kind != WEFT_JSON_OBJECT) {
		weft_json_free(*state);
		*state = NULL;
		return weft_error_set(WEFT_ERR_CORRUPT, "'%s' is not a weft trainer state (not a "
				      "JSON object)", path);
	}
	snprintf(path, sizeof(path), "%s/" WEFT_CKPT_MODEL, dir);
	if ((st = weft_st_open_header(path, model))) {
		weft_json_free(*state);
		*state = NULL;
		return weft_error_wrap(st, "checkpoint '%s'", dir);
	}
	return WEFT_OK;
}

static int inspect(const char *dir)
{
	weft_json_value *state = NULL;
	weft_st_file *model = NULL;
	const weft_json_value *slots;
	int64_t total = 0;

	if (open_ckpt(dir, &state, &model))
		return weft_cli_fail();
	printf("checkpoint %s (manifest verified)\n", dir);
	printf("  step %lld, epoch %lld, saved by strategy %s on %lld rank%s\n",
	       (long long)json_int(state, "global_step"), (long long)json_int(state, "epoch"),
	       json_str(state, "strategy"), (long long)json_int(state, "world_size"),
	       json_int(state, "world_size") == 1 ? "" : "s");
	printf("  optimizer %s, slots:", json_str(state, "optimizer"));
	slots = weft_json_get(state, "optimizer_slots");
	for (size_t k = 0; slots && slots->kind == WEFT_JSON_ARRAY && k < slots->count; k++)
		printf(" %s", slots->items[k].kind == WEFT_JSON_STRING ? slots->items[k].string : "?");
	printf(" (global flat coordinates over %lld elements: loads into any strategy and world "
	       "size)\n", (long long)json_int(state, "numel"));
	printf("  tensors of model.safetensors:\n");
	for (size_t i = 0; i < model->count; i++) {
		const weft_st_tensor *t = &model->tensors[i];
		char sh[160];

		printf("    %-44s %-5s %s\n", t->name, weft_dtype_name(t->dtype),
		       shape_of(t, sh, sizeof(sh)));
		/* each at most the file's size: the sum fits */
		total += numel_of(t);
	}
	printf("  %zu tensors, %lld elements\n", model->count, (long long)total);
	weft_st_close(model);
	weft_json_free(state);
	return 0;
}

/* Copies `n` bytes from fd_in at `at` to out, in pieces. */
static weft_status copy_range(int fd_in, const char *in_path, int64_t at, int64_t n, FILE *out,
			      const char *out_path, char *buf)
{
	while (n > 0) {
		size_t want = n > (int64_t)PIECE ? PIECE : (size_t)n;
		ssize_t got = pread(fd_in, buf, want, (off_t)at);

		if (got <= 0)
			return weft_error_set(WEFT_ERR_CORRUPT, "'%s' ends at byte %lld, inside the "
					      "data it lists", in_path, (long long)at);
		if (fwrite(buf, 1, (size_t)got, out) != (size_t)got)
			return weft_error_set(WEFT_ERR_IO, "writing '%s': %s", out_path,
					      strerror(errno));
		at += got;
		n -= got;
	}
	return WEFT_OK;
}

/* For --optimizer: the slot names (an array of 1..8 strings) and the flat
 * element count of the trainer state, checked against model.safetensors
 * (the F32 tensors' elements, in header order, are optimizer.bin's
 * coordinates) and against optimizer.bin's size. */
static weft_status check_optimizer(const char *dir, const weft_json_value *state,
				   const weft_st_file *model, const weft_json_value **slots_out,
				   int64_t *numel_out)
{
	char path[4096];
	const weft_json_value *slots = weft_json_get(state, "optimizer_slots");
	int64_t numel = json_int(state, "numel"), f32 = 0;
	struct stat sb;

	if (!slots || slots->kind != WEFT_JSON_ARRAY || slots->count == 0 || slots->count > 8)
		return weft_error_set(WEFT_ERR_CORRUPT, "checkpoint '%s': %s lists no optimizer "
				      "slots (\"optimizer_slots\" must be an array of 1 to 8 "
				      "names); export it without --optimizer", dir, WEFT_CKPT_STATE);
	for (size_t k = 0; k < slots->count; k++)
		if (slots->items[k].kind != WEFT_JSON_STRING || !slots->items[k].string[0] ||
		    strlen(slots->items[k].string) > 64)
			return weft_error_set(WEFT_ERR_CORRUPT, "checkpoint '%s': optimizer slot %zu "
					      "of %s is not a name of 1 to 64 bytes", dir, k,
					      WEFT_CKPT_STATE);
	for (size_t i = 0; i < model->count; i++)
		if (model->tensors[i].dtype == WEFT_F32)
			f32 += numel_of(&model->tensors[i]);
	if (numel != f32)
		return weft_error_set(WEFT_ERR_CORRUPT, "checkpoint '%s': %s holds optimizer state "
				      "for %lld elements but the F32 tensors of %s have %lld; the "
				      "checkpoint is damaged", dir, WEFT_CKPT_STATE,
				      (long long)numel, WEFT_CKPT_MODEL, (long long)f32);
	snprintf(path, sizeof(path), "%s/" WEFT_CKPT_OPTIMIZER, dir);
	if (stat(path, &sb) != 0)
		return weft_error_set(WEFT_ERR_NOT_FOUND, "checkpoint '%s' lacks %s: %s", dir,
				      WEFT_CKPT_OPTIMIZER, strerror(errno));
	if ((int64_t)sb.st_size != weft_optim_state_bytes(slots->count, numel))
		return weft_error_set(WEFT_ERR_CORRUPT, "'%s' holds %lld bytes, but %zu slots of "
				      "%lld elements need %lld; the checkpoint is damaged", path,
				      (long long)sb.st_size, slots->count, (long long)numel,
				      (long long)weft_optim_state_bytes(slots->count, numel));
	for (size_t i = 0; i < model->count; i++)
		if (model->tensors[i].dtype == WEFT_F32)
			for (size_t k = 0; k < slots->count; k++)
				if (strlen(model->tensors[i].name) + 1 +
				    strlen(slots->items[k].string) > WEFT_ST_MAX_NAME)
					return weft_error_set(WEFT_ERR_INVALID_ARG, "checkpoint "
							      "'%s': tensor '%.40s...' with its "
							      "slot suffix is longer than the %d "
							      "bytes a safetensors name may have "
							      "here", dir, model->tensors[i].name,
							      WEFT_ST_MAX_NAME);
	*slots_out = slots;
	*numel_out = numel;
	return WEFT_OK;
}

/* The output header (base/json.h, so every name is escaped): every weight,
 * then (slots) every slot of every F32 weight as "<name>.<slot>", offsets
 * contiguous in that order. A new string in *text; free(). */
static weft_status make_header(const char *out_path, const weft_st_file *model,
			       const weft_st_tensor *head, const weft_json_value *slots, char **text)
{
	const char **meta = malloc((2 * model->n_meta + 1) * sizeof(*meta));
	weft_json_writer w;
	char *name = NULL;
	int64_t at = 0;
	size_t n_meta = 0;
	weft_status st;

	if (!meta)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", out_path);
	for (size_t i = 0; i < model->n_meta; i++)
		if (strcmp(model->meta_keys[i], "format")) {
			meta[2 * n_meta] = model->meta_keys[i];
			meta[2 * n_meta++ + 1] = model->meta_values[i];
		}
	weft_json_writer_string(&w, 0);
	weft_st_header_begin(&w, meta, n_meta);
	free(meta);
	for (size_t pass = 0; pass <= (slots ? slots->count : 0); pass++) {
		for (size_t i = 0; i < model->count; i++) {
			const weft_st_tensor *t = &model->tensors[i];
			/* offsets within the input file or optimizer.bin: below 2^63 */
			int64_t bytes = (int64_t)(t->end - t->begin);

			if (pass && t->dtype != WEFT_F32)
				continue;
			if (pass) {
				size_t len = strlen(t->name) + strlen(slots->items[pass - 1].string)
					     + 2;
				char *grown = realloc(name, len);

				if (!grown) {
					free(name);
					weft_json_finish(&w, text);
					free(*text);
					*text = NULL;
					return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory",
							      out_path);
				}
				name = grown;
				snprintf(name, len, "%s.%s", t->name, slots->items[pass - 1].string);
			}
			weft_st_header_tensor(&w, pass ? name : t->name, t->dtype, t->ndim, t->shape,
					      at, at + bytes);
			at += bytes;
		}
		if (!pass && head) { /* after the weights: the tied head, as nanoGPT has it */
			weft_st_header_tensor(&w, "lm_head.weight", head->dtype, head->ndim,
					      head->shape, at, at + (int64_t)(head->end - head->begin));
			at += (int64_t)(head->end - head->begin);
		}
	}
	weft_json_end_object(&w);
	free(name);
	if ((st = weft_json_finish(&w, text)))
		return weft_error_wrap(st, "%s: building the safetensors header", out_path);
	return WEFT_OK;
}

static int export_ckpt(const char *dir, const char *out_path, int with_optim)
{
	static const char spaces[8] = "        ";
	char path[4096], opath[4096], tmp[4200];
	weft_json_value *state = NULL;
	weft_st_file *model = NULL, *check = NULL;
	const weft_st_tensor *head = NULL;
	const weft_json_value *slots = NULL;
	char *header = NULL, *buf = NULL;
	size_t hlen = 0, pad;
	int fd = -1, ofd = -1, rc = 1;
	FILE *out = NULL;
	int64_t numel = 0;
	weft_status st;

	tmp[0] = '\0';
	snprintf(path, sizeof(path), "%s/" WEFT_CKPT_MODEL, dir);
	snprintf(opath, sizeof(opath), "%s/" WEFT_CKPT_OPTIMIZER, dir);
	st = open_ckpt(dir, &state, &model);
	if (!st && with_optim)
		st = check_optimizer(dir, state, model, &slots, &numel);
	/* nanoGPT's state dict holds the tied head under its own name too:
	 * the export does, so that its strict load_state_dict accepts it */
	if (!st && !weft_st_find(model, "lm_head.weight"))
		head = weft_st_find(model, "transformer.wte.weight");
	if (!st)
		st = make_header(out_path, model, head, slots, &header);
	if (st)
		goto out_fail;
	hlen = strlen(header);
	pad = (8 - hlen % 8) % 8;
	buf = malloc(PIECE);
	if (!buf) {
		st = weft_error_set(WEFT_ERR_NOMEM, "export of '%s': out of memory for a %d-byte "
				    "copy buffer", dir, (int)PIECE);
		goto out_fail;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ofd = with_optim ? open(opath, O_RDONLY | O_CLOEXEC) : -2;
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", out_path, (int)getpid());
	out = fopen(tmp, "wb");
	if (fd < 0 || ofd == -1 || !out) {
		st = weft_error_set(WEFT_ERR_IO, "export of '%s' to '%s': cannot open the files "
				    "(%s)", dir, out_path, strerror(errno));
		goto out_fail;
	}
	{
		unsigned char len8[8];

		for (int i = 0; i < 8; i++)
			len8[i] = (unsigned char)((uint64_t)(hlen + pad) >> (8 * i));
		if (fwrite(len8, 1, 8, out) != 8 || fwrite(header, 1, hlen, out) != hlen ||
		    fwrite(spaces, 1, pad, out) != pad) {
			st = weft_error_set(WEFT_ERR_IO, "writing '%s': %s", tmp, strerror(errno));
			goto out_fail;
		}
	}
	/* weights, then each slot of each F32 weight at its global flat offset */
	for (size_t pass = 0; !st && pass <= (slots ? slots->count : 0); pass++) {
		int64_t flat = 0;

		for (size_t i = 0; !st && i < model->count; i++) {
			const weft_st_tensor *t = &model->tensors[i];

			if (!pass)
				st = copy_range(fd, path, (int64_t)(model->data_at + t->begin),
						(int64_t)(t->end - t->begin), out, tmp, buf);
			else if (t->dtype == WEFT_F32)
				st = copy_range(ofd, opath, 4 * ((int64_t)(pass - 1) * numel + flat),
						4 * numel_of(t), out, tmp, buf);
			if (t->dtype == WEFT_F32)
				flat += numel_of(t);
		}
		if (!st && !pass && head)
			st = copy_range(fd, path, (int64_t)(model->data_at + head->begin),
					(int64_t)(head->end - head->begin), out, tmp, buf);
	}
	if (st)
		goto out_fail;
	if (fclose(out) != 0) {
		out = NULL;
		st = weft_error_set(WEFT_ERR_IO, "finishing '%s': %s", tmp, strerror(errno));
		goto out_fail;
	}
	out = NULL;
	/* what is written passes the reader's own check before it gets its name */
	if ((st = weft_st_open_header(tmp, &check))) {
		st = weft_error_wrap(st, "export of '%s' made an invalid file (not renamed to '%s')",
				     dir, out_path);
		goto out_fail;
	}
	weft_st_close(check);
	if (rename(tmp, out_path) != 0) {
		st = weft_error_set(WEFT_ERR_IO, "finishing '%s': %s", out_path, strerror(errno));
		goto out_fail;
	}
	tmp[0] = '\0';
	printf("exported %s to %s%s\n", dir, out_path, with_optim ? " with optimizer state" : "");
	rc = 0;
	goto out;
out_fail:
	rc = weft_cli_fail();
	if (out)
		fclose(out);
	if (tmp[0])
		unlink(tmp);
out:
	if (fd >= 0)
		close(fd);
	if (ofd >= 0)
		close(ofd);
	free(buf);
	free(header);
	weft_st_close(model);
	weft_json_free(state);
	return rc;
}

/* ---- --format hf ---- */

/* The transformer of a checkpoint's model.safetensors: the shapes give
 * the sizes but the head count, which comes from the weights' metadata
 * (weft saves it) or from --n-head (n_head > 0); the metadata gives the
 * choices beyond GPT-2's (nn_hf_arch_meta_get), and with them the family
 * transformers loads it as. */
static weft_status hf_config_of(const char *dir, const weft_st_file *model, int64_t n_head,
				weft_gpt_config *c, nn_arch *a, const nn_hf_family **family)
{
	const weft_st_tensor *wte = weft_st_find(model, "transformer.wte.weight");
	const weft_st_tensor *wpe = weft_st_find(model, "transformer.wpe.weight");
	const char *meta = weft_st_meta(model, "weft.n_head");
	const char *blocks = weft_st_meta(model, "weft.block_size");
	char name[64], what[4200];
	int found = 0;
	weft_status st;

	memset(c, 0, sizeof(*c));
	snprintf(what, sizeof(what), "checkpoint '%s' (%s)", dir, WEFT_CKPT_MODEL);
	if (!wte || wte->ndim != 2)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "checkpoint '%s' holds no transformer "
				      "(its %s has no transformer.wte.weight: the weights of a "
				      "model.class mlp or of a model plugin), and --format hf writes "
				      "transformers' GPT-2 and Llama layouts only; export it with "
				      "the default --format safetensors", dir, WEFT_CKPT_MODEL);
	c->vocab_size = wte->shape[0];
	c->n_embd = wte->shape[1];
	c->block_size = wpe && wpe->ndim == 2 ? wpe->shape[0] : blocks ? strtoll(blocks, NULL, 10) : 0;
	while (snprintf(name, sizeof(name), "transformer.h.%lld.ln_1.weight",
			(long long)c->n_layer), weft_st_find(model, name))
		c->n_layer++;
	/* c_proj: Qwen2 has c_attn's bias alone (nn_arch.qkv_bias) */
	c->bias = weft_st_find(model, "transformer.h.0.attn.c_proj.bias") != NULL;
	if (n_head > 0 && meta && strtoll(meta, NULL, 10) != n_head)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "checkpoint '%s' records n_head %s "
				      "but --n-head is %lld; leave --n-head out", dir, meta,
				      (long long)n_head);
	if (n_head > 0)
		c->n_head = n_head;
	else if (meta)
		c->n_head = strtoll(meta, NULL, 10);
	else
		return weft_error_set(WEFT_ERR_INVALID_ARG, "checkpoint '%s' does not record its "
				      "head count (saved before weft recorded it in %s's "
				      "metadata); give it with --n-head N (model.n_head of the run)",
				      dir, WEFT_CKPT_MODEL);
	if (c->n_layer < 1 || c->n_head < 1 || c->n_embd % c->n_head || c->block_size < 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "checkpoint '%s': n_embd %lld, "
				      "n_layer %lld, n_head %lld, block_size %lld is not a "
				      "transformer's shape (n_embd must be a multiple of n_head); "
				      "check --n-head", dir, (long long)c->n_embd,
				      (long long)c->n_layer, (long long)c->n_head,
				      (long long)c->block_size);
	if ((st = nn_hf_arch_meta_get(model, what, c, a, &found)))
		return st;
	if (!found && !wpe)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "checkpoint '%s' has no learned "
				      "positions (transformer.wpe.weight) and does not record its "
				      "transformer's choices (norm, rope, mlp: saved before weft "
				      "recorded them in %s's metadata), so its config.json cannot "
				      "be written; load it into a run with the same model config "
				      "and save it again, or export with --format safetensors", dir,
				      WEFT_CKPT_MODEL);
	return nn_hf_family_for(c, a, what, family);
}

/* Copies tensor t of fd (data at data_at) to out, [rows, cols] written as
 * [cols, rows]; buf and tbuf hold the tensor. */
static weft_status copy_transposed(int fd, const char *in_path, uint64_t data_at,
				   const weft_st_tensor *t, FILE *out, const char *out_path,
				   unsigned char *buf, unsigned char *tbuf)
{
	int64_t rows = t->shape[0], cols = t->shape[1];
	size_t es = weft_dtype_size(t->dtype), bytes = (size_t)(t->end - t->begin), done = 0;

	while (done < bytes) {
		ssize_t got = pread(fd, buf + done, bytes - done, (off_t)(data_at + t->begin + done));

		if (got <= 0)
			return weft_error_set(WEFT_ERR_CORRUPT, "'%s' ends inside tensor '%s'",
					      in_path, t->name);
		done += (size_t)got;
	}
	for (int64_t r = 0; r < rows; r++)
		for (int64_t k = 0; k < cols; k++)
			memcpy(tbuf + (size_t)(k * rows + r) * es, buf + (size_t)(r * cols + k) * es,
			       es);
	if (fwrite(tbuf, 1, bytes, out) != bytes)
		return weft_error_set(WEFT_ERR_IO, "writing '%s': %s", out_path, strerror(errno));
	return WEFT_OK;
}

/* One tensor of the export: tensor t of the checkpoint, or (a part of
 * NN_HF_ROWS) its rows [row, row + rows), under the family's name. */
typedef struct hf_piece {
	const weft_st_tensor *t;
	char name[WEFT_ST_MAX_NAME + 1];
	nn_hf_how how;
	int64_t row, rows;
} hf_piece;

/* The export's pieces of the checkpoint's tensors, in their order:
 * Llama's stacked q | k | v and gate | up split into their tensors by
 * rows, the tied head left out as save_pretrained leaves it. *out is new
 * (free), *n of them. Errors: WEFT_ERR_CORRUPT when a stacked tensor's
 * rows are not the sum its parts need (the metadata and the shapes
 * disagree). */
static weft_status hf_pieces(const char *dir, const weft_st_file *model,
			     const nn_hf_family *f, const weft_gpt_config *c, const nn_arch *a,
			     hf_piece **out, size_t *n)
{
	size_t cap = 4 * model->count + 1;
	hf_piece *p = calloc(cap, sizeof(*p));
	char shape[160];

	*out = p;
	*n = 0;
	if (!p)
		return weft_error_set(WEFT_ERR_NOMEM, "export of '%s': out of memory", dir);
	for (size_t i = 0; i < model->count; i++) {
		const weft_st_tensor *t = &model->tensors[i];
		int64_t row = 0;

		if (!strcmp(t->name, f->head) && !a->untied)
			continue;
		for (int part = 0; *n < cap; part++) {
			hf_piece *q = &p[*n];

			if (!nn_hf_from_weft_part(f, t->name, part, c, a, q->name, sizeof(q->name),
						  &q->how, &q->rows))
				break;
			q->t = t;
			q->row = row;
			row += q->rows;
			(*n)++;
			if (q->how != NN_HF_ROWS)
				break;
		}
		if (row && (t->ndim < 1 || t->ndim > 2 || row != t->shape[0]))
			return weft_error_set(WEFT_ERR_CORRUPT, "checkpoint '%s': tensor '%s' has "
					      "shape %s, but its %s parts need %lld rows in all "
					      "(n_embd %lld, n_head %lld, n_kv_head %lld, "
					      "intermediate_size %lld in %s's metadata); the file was "
					      "changed after weft saved it", dir, t->name,
					      shape_of(t, shape, sizeof(shape)), f->architecture,
					      (long long)row, (long long)c->n_embd,
					      (long long)c->n_head,
					      (long long)(a->n_kv_head ? a->n_kv_head : c->n_head),
					      (long long)a->intermediate, WEFT_CKPT_MODEL);
	}
	return WEFT_OK;
}

/* OUT/config.json and OUT/model.safetensors in transformers' layout of
 * the model's family (GPT2LMHeadModel or LlamaForCausalLM from_pretrained
 * loads them): GPT-2's names with its Conv1D weights transposed to
 * [in, out], or Llama's names with q | k | v and gate | up split by rows
 * (the q/k rows as they are: weft's RoPE already pairs them as HF's
 * rotate-half does); a tied head left out as save_pretrained leaves it.
 * Streamed tensor by tensor: at most one tensor and its transpose are
 * held. */
static int export_hf(const char *dir, const char *out_dir, int64_t n_head)
{
	static const char spaces[8] = "        ";
	char path[4096], wpath[4200], cpath[4200], tmp[4300], ctmp[4300];
	weft_json_value *state = NULL;
	weft_st_file *model = NULL, *check = NULL;
	const nn_hf_family *fam = NULL;
	weft_gpt_config cfg;
	nn_arch arch;
	weft_json_writer w;
	hf_piece *pieces = NULL;
	size_t n_pieces = 0;
	char *header = NULL;
	unsigned char *buf = NULL, *tbuf = NULL;
	size_t most = 1;
	int64_t at = 0;
	int fd = -1, rc = 1;
	FILE *out = NULL;
	struct stat sb;
	weft_status st;

	tmp[0] = ctmp[0] = '\0';
	snprintf(path, sizeof(path), "%s/" WEFT_CKPT_MODEL, dir);
	snprintf(wpath, sizeof(wpath), "%s/" NN_HF_WEIGHTS, out_dir);
	snprintf(cpath, sizeof(cpath), "%s/" NN_HF_CONFIG, out_dir);
	if ((st = open_ckpt(dir, &state, &model)) ||
	    (st = hf_config_of(dir, model, n_head, &cfg, &arch, &fam)) ||
	    (st = hf_pieces(dir, model, fam, &cfg, &arch, &pieces, &n_pieces)))
		goto out_fail;
	if (mkdir(out_dir, 0777) != 0 && (errno != EEXIST || stat(out_dir, &sb) != 0 ||
					  !S_ISDIR(sb.st_mode))) {
		st = weft_error_set(WEFT_ERR_IO, "export of '%s': cannot make the directory '%s' "
				    "(%s)", dir, out_dir, errno == EEXIST ? "a file of that name "
				    "exists" : strerror(errno));
		goto out_fail;
	}
	snprintf(ctmp, sizeof(ctmp), "%s.tmp%d", cpath, (int)getpid());
	st = fam != &nn_hf_gpt2 ? nn_hf_llama_config_write(ctmp, &cfg, &arch) :
				  nn_hf_gpt2_config_write(ctmp, &cfg, &arch);
	if (st)
		goto out_fail;
	weft_json_writer_string(&w, 0);
	weft_st_header_begin(&w, NULL, 0);
	for (size_t i = 0; i < n_pieces; i++) {
		const hf_piece *q = &pieces[i];
		const weft_st_tensor *t = q->t;
		int64_t shape[WEFT_MAX_DIMS], bytes = (int64_t)(t->end - t->begin);

		memcpy(shape, t->shape, sizeof(shape));
		if (q->how == NN_HF_TRANSPOSE) {
			shape[0] = t->shape[1];
			shape[1] = t->shape[0];
		} else if (q->how == NN_HF_ROWS) {
			shape[0] = q->rows;
			bytes = bytes / t->shape[0] * q->rows;
		}
		weft_st_header_tensor(&w, q->name, t->dtype, t->ndim, shape, at, at + bytes);
		at += bytes;
		if ((size_t)(t->end - t->begin) > most)
			most = (size_t)(t->end - t->begin);
	}
	weft_json_end_object(&w);
	if ((st = weft_json_finish(&w, &header))) {
		st = weft_error_wrap(st, "%s: building the safetensors header", wpath);
		goto out_fail;
	}
	buf = malloc(most);
	tbuf = fam == &nn_hf_gpt2 ? malloc(most) : malloc(1);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", wpath, (int)getpid());
	out = fopen(tmp, "wb");
	if (!buf || !tbuf || fd < 0 || !out) {
		st = weft_error_set(!buf || !tbuf ? WEFT_ERR_NOMEM : WEFT_ERR_IO, "export of '%s' "
				    "to '%s': %s", dir, out_dir, !buf || !tbuf ? "out of memory for "
				    "one tensor" : strerror(errno));
		goto out_fail;
	}
	{
		size_t hlen = strlen(header), pad = (8 - hlen % 8) % 8;
		unsigned char len8[8];

		for (int i = 0; i < 8; i++)
			len8[i] = (unsigned char)((uint64_t)(hlen + pad) >> (8 * i));
		if (fwrite(len8, 1, 8, out) != 8 || fwrite(header, 1, hlen, out) != hlen ||
		    fwrite(spaces, 1, pad, out) != pad) {
			st = weft_error_set(WEFT_ERR_IO, "writing '%s': %s", tmp, strerror(errno));
			goto out_fail;
		}
	}
	for (size_t i = 0; !st && i < n_pieces; i++) {
		const hf_piece *q = &pieces[i];
		const weft_st_tensor *t = q->t;
		int64_t bytes = (int64_t)(t->end - t->begin);

		if (q->how == NN_HF_TRANSPOSE && t->ndim == 2) {
			st = copy_transposed(fd, path, model->data_at, t, out, tmp, buf, tbuf);
		} else if (q->how == NN_HF_ROWS) {
			int64_t row_bytes = bytes / t->shape[0];

			st = copy_range(fd, path, (int64_t)(model->data_at + t->begin) +
					q->row * row_bytes, q->rows * row_bytes, out, tmp,
					(char *)buf);
		} else {
			st = copy_range(fd, path, (int64_t)(model->data_at + t->begin), bytes, out,
					tmp, (char *)buf);
		}
	}
	if (st)
		goto out_fail;
	if (fclose(out) != 0) {
		out = NULL;
		st = weft_error_set(WEFT_ERR_IO, "finishing '%s': %s", tmp, strerror(errno));
		goto out_fail;
	}
	out = NULL;
	if ((st = weft_st_open_header(tmp, &check))) {
		st = weft_error_wrap(st, "export of '%s' made an invalid file (not renamed to '%s')",
				     dir, wpath);
		goto out_fail;
	}
	weft_st_close(check);
	if (rename(tmp, wpath) != 0 || rename(ctmp, cpath) != 0) {
		st = weft_error_set(WEFT_ERR_IO, "finishing '%s': %s", out_dir, strerror(errno));
		goto out_fail;
	}
	tmp[0] = ctmp[0] = '\0';
	if (fam != &nn_hf_gpt2)
		printf("exported %s to %s (transformers %s: num_hidden_layers %lld, "
		       "num_attention_heads %lld, num_key_value_heads %lld, hidden_size %lld, "
		       "intermediate_size %lld, vocab_size %lld, max_position_embeddings %lld, "
		       "tie_word_embeddings %s)\n", dir, out_dir, fam->architecture,
		       (long long)cfg.n_layer,
		       (long long)cfg.n_head,
		       (long long)(arch.n_kv_head ? arch.n_kv_head : cfg.n_head),
		       (long long)cfg.n_embd, (long long)arch.intermediate,
		       (long long)cfg.vocab_size, (long long)cfg.block_size,
		       arch.untied ? "false" : "true");
	else
		printf("exported %s to %s (transformers GPT2LMHeadModel: n_layer %lld, n_head "
		       "%lld, n_embd %lld, vocab_size %lld, n_positions %lld)\n", dir, out_dir,
		       (long long)cfg.n_layer, (long long)cfg.n_head, (long long)cfg.n_embd,
		       (long long)cfg.vocab_size, (long long)cfg.block_size);
	rc = 0;
	goto out;
out_fail:
	rc = weft_cli_fail();
	if (out)
		fclose(out);
	if (tmp[0])
		unlink(tmp);
	if (ctmp[0])
		unlink(ctmp);
out:
	if (fd >= 0)
		close(fd);
	free(pieces);
	free(buf);
	free(tbuf);
	free(header);
	weft_st_close(model);
	weft_json_free(state);
	return rc;
}

static int reshard(const char *dir, const char *world)
{
	weft_json_value *state = NULL;
	weft_st_file *model = NULL;

	if (open_ckpt(dir, &state, &model))
		return weft_cli_fail();
	weft_st_close(model);
	printf("checkpoint %s (strategy %s, %lld ranks) is stored in global flat coordinates: "
	       "it loads as it is into any strategy and world size%s%s; nothing to convert\n", dir,
	       json_str(state, "strategy"), (long long)json_int(state, "world_size"),
	       world ? ", including world size " : "", world ? world : "");
	weft_json_free(state);
	return 0;
}

/* export DIR OUT [--optimizer] [--format safetensors|hf] [--n-head N] */
static int export_cmd(int argc, char **argv)
{
	const char *format = "safetensors";
	int64_t n_head = 0;
	int optim = 0;

	for (int i = 4; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;

		if (!strcmp(argv[i], "--optimizer")) {
			optim = 1;
		} else if (!strcmp(argv[i], "--format") && v) {
			format = v;
			i++;
		} else if (!strcmp(argv[i], "--n-head") && v) {
			n_head = strtoll(v, &end, 10);
			if (*end || n_head < 1) {
				fprintf(stderr, "weft ckpt export: --n-head '%s' is not a positive "
					"integer\n", v);
				return 2;
			}
			i++;
		} else {
			fprintf(stderr, "weft ckpt export: unknown option '%s'%s\n", argv[i],
				v || argv[i][0] != '-' ? "" : " (it needs a value)");
			usage(stderr);
			return 2;
		}
	}
	if (strcmp(format, "safetensors") && strcmp(format, "hf")) {
		fprintf(stderr, "weft ckpt export: --format '%s' is not known; give safetensors "
			"(one file, nanoGPT's names) or hf (a transformers GPT-2 or Llama "
			"directory)\n",
			format);
		return 2;
	}
	if (!strcmp(format, "hf")) {
		if (optim) {
			fprintf(stderr, "weft ckpt export: --optimizer goes with --format "
				"safetensors; a transformers directory holds weights alone\n");
			return 2;
		}
		return export_hf(argv[2], argv[3], n_head);
	}
	if (n_head) {
		fprintf(stderr, "weft ckpt export: --n-head goes with --format hf (its "
			"config.json)\n");
		return 2;
	}
	return export_ckpt(argv[2], argv[3], optim);
}

int weft_cmd_ckpt(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "inspect"))
		return inspect(argv[2]);
	if (argc >= 4 && !strcmp(argv[1], "export"))
		return export_cmd(argc, argv);
	if (argc >= 3 && !strcmp(argv[1], "reshard")) {
		const char *w = NULL;

		if (argc == 5 && !strcmp(argv[3], "--world-size"))
			w = argv[4];
		else if (argc == 4 && !strncmp(argv[3], "--world-size=", 13))
			w = argv[3] + 13;
		else if (argc != 3) {
			usage(stderr);
			return 2;
		}
		return reshard(argv[2], w);
	}
	usage(stderr);
	return 2;
}
