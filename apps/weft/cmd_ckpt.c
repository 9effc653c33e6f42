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
 *                                ranges; no whole optimizer state is held
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
#include "nn/safetensors.h"
#include "train/checkpoint_files.h"
#include "train/optim_state.h"
#include "weft/weft.h"

#define PIECE (1u << 20)

static void usage(FILE *out)
{
	fprintf(out, "usage: weft ckpt inspect DIR\n"
		"       weft ckpt export DIR OUT.safetensors [--optimizer]\n"
		"       weft ckpt reshard DIR [--world-size N]\n"
		"\ninspect lists what a checkpoint holds; export writes its weights (and with\n"
		"--optimizer every optimizer slot as <param>.<slot>) to one safetensors file,\n"
		"streaming tensor by tensor; reshard is not needed: weft saves optimizer state\n"
		"in global flat coordinates, so any strategy and world size resumes from any\n"
		"checkpoint as it is (reshard verifies it and changes nothing).\n");
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
			       const weft_json_value *slots, char **text)
{
	weft_json_writer w;
	char *name = NULL;
	int64_t at = 0;
	weft_status st;

	weft_json_writer_string(&w, 0);
	weft_st_header_begin(&w, NULL, 0);
	for (size_t pass = 0; pass <= (slots ? slots->count : 0); pass++)
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
	if (!st)
		st = make_header(out_path, model, slots, &header);
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

int weft_cmd_ckpt(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "inspect"))
		return inspect(argv[2]);
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "export")) {
		if (argc == 5 && strcmp(argv[4], "--optimizer") != 0) {
			fprintf(stderr, "weft ckpt export: unknown option '%s'\n", argv[4]);
			usage(stderr);
			return 2;
		}
		return export_ckpt(argv[2], argv[3], argc == 5);
	}
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
