/* `weft ckpt inspect|export|reshard DIR ...`: checkpoints made by weft fit
 * (core/train/checkpoint.c): model.safetensors (whole weights),
 * optimizer.bin (slots in global flat coordinates), trainer_state.json,
 * manifest.json.
 *
 *   inspect DIR                  manifest, step, strategy, world size,
 *                                optimizer slots, every tensor
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
#include "train/checkpoint_files.h"
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

/* The safetensors header of `path`: its JSON tree and the byte where the
 * data begins. Only the header is read. */
static weft_status read_header(const char *path, weft_json_value **js, uint64_t *data_at)
{
	unsigned char len8[8];
	uint64_t n = 0;
	char *text = NULL;
	FILE *f = fopen(path, "rb");
	weft_status st;

	if (!f)
		return weft_error_set(errno == ENOENT ? WEFT_ERR_NOT_FOUND : WEFT_ERR_IO,
				      "cannot open '%s': %s", path, strerror(errno));
	if (fread(len8, 1, 8, f) != 8) {
		fclose(f);
		return weft_error_set(WEFT_ERR_CORRUPT, "'%s' is shorter than a safetensors header",
				      path);
	}
	for (int i = 7; i >= 0; i--)
		n = (n << 8) | len8[i];
	if (n == 0 || n > 100000000u || !(text = malloc(n))) {
		fclose(f);
		return weft_error_set(WEFT_ERR_CORRUPT, "'%s': header length %llu is not plausible",
				      path, (unsigned long long)n);
	}
	if (fread(text, 1, n, f) != n) {
		free(text);
		fclose(f);
		return weft_error_set(WEFT_ERR_CORRUPT, "'%s' ends inside its header", path);
	}
	fclose(f);
	st = weft_json_parse(path, text, n, js);
	free(text);
	*data_at = 8 + n;
	return st;
}

/* Tensor i of a header (skipping __metadata__): name, dtype, shape text,
 * numel, data offsets. Returns 0 when it is not a tensor entry. */
typedef struct tinfo {
	const char *name, *dtype;
	int64_t numel, begin, end;
	char shape[160];
	int32_t ndim;
	int64_t dims[8];
} tinfo;

static int tensor_at(const weft_json_value *js, size_t i, tinfo *t)
{
	const weft_json_value *v = &js->items[i], *dt, *sh, *off;
	size_t len = 0;

	if (!strcmp(js->keys[i], "__metadata__"))
		return 0;
	dt = weft_json_get(v, "dtype");
	sh = weft_json_get(v, "shape");
	off = weft_json_get(v, "data_offsets");
	if (!dt || dt->kind != WEFT_JSON_STRING || !sh || sh->kind != WEFT_JSON_ARRAY ||
	    sh->count > 8 || !off || off->kind != WEFT_JSON_ARRAY || off->count != 2)
		return 0;
	t->name = js->keys[i];
	t->dtype = dt->string;
	t->numel = 1;
	t->ndim = (int32_t)sh->count;
	len += (size_t)snprintf(t->shape, sizeof(t->shape), "[");
	for (size_t k = 0; k < sh->count; k++) {
		t->dims[k] = sh->items[k].integer;
		t->numel *= t->dims[k];
		len += (size_t)snprintf(t->shape + len, sizeof(t->shape) - len, "%s%lld",
					k ? ", " : "", (long long)t->dims[k]);
	}
	snprintf(t->shape + len, sizeof(t->shape) - len, "]");
	t->begin = off->items[0].integer;
	t->end = off->items[1].integer;
	return 1;
}

static int64_t json_int(const weft_json_value *js, const char *key)
{
	const weft_json_value *v = weft_json_get(js, key);

	return v && v->kind == WEFT_JSON_NUMBER ? (int64_t)v->number : -1;
}

static const char *json_str(const weft_json_value *js, const char *key)
{
	const weft_json_value *v = weft_json_get(js, key);

	return v && v->kind == WEFT_JSON_STRING ? v->string : "?";
}

static weft_status load_state(const char *dir, weft_json_value **state)
{
	char path[4096];
	weft_status st = weft_checkpoint_verify(dir);

	if (st)
		return weft_error_wrap(st, "checkpoint '%s'", dir);
	snprintf(path, sizeof(path), "%s/trainer_state.json", dir);
	return weft_json_parse_file(path, state);
}

static int inspect(const char *dir)
{
	char path[4096];
	weft_json_value *state = NULL, *hdr = NULL;
	const weft_json_value *slots;
	uint64_t data_at;
	int64_t total = 0;
	size_t nt = 0;

	if (load_state(dir, &state))
		return weft_cli_fail();
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	if (read_header(path, &hdr, &data_at)) {
		weft_json_free(state);
		return weft_cli_fail();
	}
	printf("checkpoint %s (manifest verified)\n", dir);
	printf("  step %lld, epoch %lld, saved by strategy %s on %lld rank%s\n",
	       (long long)json_int(state, "global_step"), (long long)json_int(state, "epoch"),
	       json_str(state, "strategy"), (long long)json_int(state, "world_size"),
	       json_int(state, "world_size") == 1 ? "" : "s");
	printf("  optimizer %s, slots:", json_str(state, "optimizer"));
	slots = weft_json_get(state, "optimizer_slots");
	for (size_t k = 0; slots && k < slots->count; k++)
		printf(" %s", slots->items[k].kind == WEFT_JSON_STRING ? slots->items[k].string : "?");
	printf(" (global flat coordinates over %lld elements: loads into any strategy and world "
	       "size)\n", (long long)json_int(state, "numel"));
	printf("  tensors of model.safetensors:\n");
	for (size_t i = 0; hdr->kind == WEFT_JSON_OBJECT && i < hdr->count; i++) {
		tinfo t;

		if (!tensor_at(hdr, i, &t))
			continue;
		printf("    %-44s %-5s %s\n", t.name, t.dtype, t.shape);
		total += t.numel;
		nt++;
	}
	printf("  %zu tensors, %lld elements\n", nt, (long long)total);
	weft_json_free(hdr);
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

/* The output header: every weight, then (with_optim) every slot of every
 * F32 weight, offsets contiguous in that order; padded to 8 bytes. */
static char *make_header(const weft_json_value *hdr, const weft_json_value *slots, int with_optim,
			 size_t *len_out)
{
	size_t cap = 4096 + hdr->count * 512 * (1 + (slots ? slots->count : 0)), len = 0;
	char *h = malloc(cap);
	int64_t at = 0;

	if (!h)
		return NULL;
	len += (size_t)snprintf(h, cap, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (size_t pass = 0; pass <= (with_optim && slots ? slots->count : 0); pass++)
		for (size_t i = 0; i < hdr->count; i++) {
			tinfo t;
			int64_t bytes;

			if (!tensor_at(hdr, i, &t) || (pass && strcmp(t.dtype, "F32") != 0))
				continue;
			bytes = t.end - t.begin;
			if (pass)
				len += (size_t)snprintf(h + len, cap - len, ",\"%s.%s\"", t.name,
							slots->items[pass - 1].string);
			else
				len += (size_t)snprintf(h + len, cap - len, ",\"%s\"", t.name);
			len += (size_t)snprintf(h + len, cap - len, ":{\"dtype\":\"%s\",\"shape\":%s,"
						"\"data_offsets\":[%lld,%lld]}", t.dtype, t.shape,
						(long long)at, (long long)(at + bytes));
			at += bytes;
		}
	len += (size_t)snprintf(h + len, cap - len, "}");
	while (len % 8)
		h[len++] = ' ';
	*len_out = len;
	return len < cap ? h : (free(h), NULL);
}

static int export_ckpt(const char *dir, const char *out_path, int with_optim)
{
	char path[4096], opath[4096], tmp[4200];
	weft_json_value *state = NULL, *hdr = NULL;
	const weft_json_value *slots = NULL;
	uint64_t data_at;
	char *header = NULL, *buf = NULL;
	size_t hlen = 0;
	int fd = -1, ofd = -1, rc = 1;
	FILE *out = NULL;
	int64_t numel;
	weft_status st;

	st = load_state(dir, &state);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	snprintf(opath, sizeof(opath), "%s/optimizer.bin", dir);
	if (!st)
		st = read_header(path, &hdr, &data_at);
	if (st)
		goto out_fail;
	numel = json_int(state, "numel");
	slots = weft_json_get(state, "optimizer_slots");
	if (with_optim && (!slots || slots->kind != WEFT_JSON_ARRAY)) {
		st = weft_error_set(WEFT_ERR_CORRUPT, "checkpoint '%s' lists no optimizer slots",
				    dir);
		goto out_fail;
	}
	header = make_header(hdr, slots, with_optim, &hlen);
	buf = malloc(PIECE);
	fd = open(path, O_RDONLY);
	ofd = with_optim ? open(opath, O_RDONLY) : -2;
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", out_path, (int)getpid());
	out = fopen(tmp, "wb");
	if (!header || !buf || fd < 0 || ofd == -1 || !out) {
		st = weft_error_set(WEFT_ERR_IO, "export of '%s' to '%s': cannot open the files "
				    "(%s)", dir, out_path, strerror(errno));
		goto out_fail;
	}
	{
		unsigned char len8[8];

		for (int i = 0; i < 8; i++)
			len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
		if (fwrite(len8, 1, 8, out) != 8 || fwrite(header, 1, hlen, out) != hlen) {
			st = weft_error_set(WEFT_ERR_IO, "writing '%s': %s", tmp, strerror(errno));
			goto out_fail;
		}
	}
	/* weights, then each slot of each F32 weight at its global flat offset */
	for (size_t pass = 0; !st && pass <= (with_optim ? slots->count : 0); pass++) {
		int64_t flat = 0;

		for (size_t i = 0; !st && i < hdr->count; i++) {
			tinfo t;

			if (!tensor_at(hdr, i, &t))
				continue;
			if (!pass)
				st = copy_range(fd, path, (int64_t)data_at + t.begin, t.end - t.begin,
						out, tmp, buf);
			else if (!strcmp(t.dtype, "F32"))
				st = copy_range(ofd, opath, 4 * ((int64_t)(pass - 1) * numel + flat),
						4 * t.numel, out, tmp, buf);
			if (!strcmp(t.dtype, "F32"))
				flat += t.numel;
		}
	}
	if (st)
		goto out_fail;
	if (fclose(out) != 0 || rename(tmp, out_path) != 0) {
		out = NULL;
		st = weft_error_set(WEFT_ERR_IO, "finishing '%s': %s", out_path, strerror(errno));
		goto out_fail;
	}
	out = NULL;
	printf("exported %s to %s%s\n", dir, out_path, with_optim ? " with optimizer state" : "");
	rc = 0;
	goto out;
out_fail:
	rc = weft_cli_fail();
	if (out) {
		fclose(out);
		unlink(tmp);
	}
out:
	if (fd >= 0)
		close(fd);
	if (ofd >= 0)
		close(ofd);
	free(buf);
	free(header);
	weft_json_free(hdr);
	weft_json_free(state);
	return rc;
}

static int reshard(const char *dir, const char *world)
{
	weft_json_value *state = NULL;

	if (load_state(dir, &state))
		return weft_cli_fail();
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
