/* `weft tokenize --tokenizer tokenizer.json --out train.bin [options]
 * FILES...`: text files -> llm.c/nanoGPT token files (core/text), the
 * documents encoded on several threads, written in input order. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"
#include "commands.h"
#include "text/tokenizer.h"
#include "weft/weft.h"

/* llm.c's token file header (core/data/tokens.c reads it back). */
#define LLMC_MAGIC_U16 20240520
#define LLMC_VERSION_U16 1
#define LLMC_MAGIC_U32 20240801
#define LLMC_VERSION_U32 7
#define LLMC_HEADER_INTS 256

#define PIECE_BYTES (256u << 10)
#define MAX_THREADS 256

static void usage(FILE *out)
{
	fprintf(out,
		"usage: weft tokenize --tokenizer FILE --out TRAIN.bin [--val-fraction F]\n"
		"                     [--val-out VAL.bin] [--threads N] [--doc-delimiter TEXT]\n"
		"                     [--eos TOKEN | --no-eos] [--quiet] FILES...\n"
		"\nencodes text FILES with a byte-level BPE tokenizer.json (GPT-2's or Llama 3's\n"
		"kind) into llm.c token files that data.class tokens reads (and nanoGPT's and\n"
		"llm.c's loaders): a 1024-byte header, then uint16 ids when the vocabulary has\n"
		"at most 65536 ids (magic 20240520), uint32 otherwise (magic 20240801).\n"
		"Each file is one document, or several split at --doc-delimiter (C escapes\n"
		"\\n \\t \\r \\\\; e.g. '\\n%%\\n' for fortune files); the end-of-text token\n"
		"(--eos, default the tokenizer's <|endoftext|> or <|end_of_text|>) follows\n"
		"each document. --val-fraction F writes the last F of the text (by bytes) to\n"
		"--val-out (default: TRAIN.bin with 'train' replaced by 'val', or _val added).\n"
		"--threads defaults to the CPUs online; the output does not depend on it.\n");
}

typedef struct out_file {
	const char *path;
	FILE *f;
	int64_t count;
} out_file;

typedef struct unit {
	const char *text;
	size_t len;
	int64_t at;       /* byte offset in the whole input */
	int doc_end;      /* the last piece of a document */
} unit;

typedef struct run {
	const weft_tokenizer *tok;
	weft_tokenizer_encoder *enc[MAX_THREADS];
	int threads, elem, quiet, tty;
	int64_t eos;
	int64_t total, done, val_from; /* bytes; text from val_from on is validation */
	out_file train, val;
	unit *units;
	size_t n_units, cap_units, pending; /* pending: bytes in units */
	double t0, last_report;
	int last_decile;
} run;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static weft_status write_ids(out_file *o, const uint32_t *ids, size_t n, int elem)
{
	uint16_t buf16[4096];
	size_t wrote = 0;

	if (o->count + (int64_t)n > INT32_MAX)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "'%s' would hold more than 2^31 - 1 "
				      "tokens, the most an llm.c header can count; split the input "
				      "into several runs", o->path);
	if (elem == 4) {
		wrote = fwrite(ids, 4, n, o->f);
	} else {
		for (size_t i = 0; i < n; i += 4096) {
			size_t k = n - i < 4096 ? n - i : 4096;

			for (size_t j = 0; j < k; j++)
				buf16[j] = (uint16_t)ids[i + j];
			wrote += fwrite(buf16, 2, k, o->f);
		}
	}
	if (wrote != n)
		return weft_error_set(WEFT_ERR_IO, "cannot write '%s': %s", o->path,
				      strerror(errno));
	o->count += (int64_t)n;
	return WEFT_OK;
}

static weft_status open_out(out_file *o, int elem)
{
	int32_t header[LLMC_HEADER_INTS] = { 0 };

	o->f = fopen(o->path, "wb");
	if (!o->f)
		return weft_error_set(WEFT_ERR_IO, "cannot create '%s': %s; check that its folder "
				      "exists and is writable", o->path, strerror(errno));
	(void)elem;
	if (fwrite(header, sizeof(header), 1, o->f) != 1)
		return weft_error_set(WEFT_ERR_IO, "cannot write '%s': %s", o->path,
				      strerror(errno));
	return WEFT_OK;
}

/* Writes the header with the final count and closes the file. */
static weft_status close_out(out_file *o, int elem)
{
	int32_t header[LLMC_HEADER_INTS] = { 0 };
	int bad;

	header[0] = elem == 2 ? LLMC_MAGIC_U16 : LLMC_MAGIC_U32;
	header[1] = elem == 2 ? LLMC_VERSION_U16 : LLMC_VERSION_U32;
	header[2] = (int32_t)o->count;
	bad = fseek(o->f, 0, SEEK_SET) != 0 || fwrite(header, sizeof(header), 1, o->f) != 1;
	bad |= fclose(o->f) != 0;
	o->f = NULL;
	if (bad)
		return weft_error_set(WEFT_ERR_IO, "cannot write '%s': %s", o->path,
				      strerror(errno));
	return WEFT_OK;
}

static void progress(run *r, int final)
{
	double t = now(), mb = 1e-6 * (double)r->done;
	double rate = t > r->t0 ? mb / (t - r->t0) : 0;
	int pct = r->total ? (int)(100 * r->done / r->total) : 100;

	if (r->quiet)
		return;
	if (r->tty) {
		if (!final && t - r->last_report < 0.2)
			return;
		fprintf(stderr, "\rtokenize: %3d%% %.1f of %.1f MB, %.1f MB/s, %" PRId64 " tokens%s",
			pct, mb, 1e-6 * (double)r->total, rate, r->train.count + r->val.count,
			final ? "\n" : "");
	} else if (pct / 10 > r->last_decile || final) {
		r->last_decile = pct / 10;
		fprintf(stderr, "tokenize: %3d%% %.1f of %.1f MB, %.1f MB/s, %" PRId64 " tokens\n",
			pct, mb, 1e-6 * (double)r->total, rate, r->train.count + r->val.count);
	}
	r->last_report = t;
}

/* Encodes the pending units and writes their ids in order. */
static weft_status flush(run *r)
{
	weft_token_ids *outs;
	const char **texts;
	size_t *lens, n = r->n_units;
	weft_status st = WEFT_OK;

	if (n == 0)
		return WEFT_OK;
	outs = calloc(n, sizeof(*outs));
	texts = malloc(n * sizeof(*texts));
	lens = malloc(n * sizeof(*lens));
	if (!outs || !texts || !lens) {
		st = weft_error_set(WEFT_ERR_NOMEM, "out of memory tokenizing");
		goto out_free;
	}
	for (size_t i = 0; i < r->n_units; i++) {
		texts[i] = r->units[i].text;
		lens[i] = r->units[i].len;
	}
	st = weft_tokenizer_encode_many(r->enc, r->threads, texts, lens, r->n_units, outs);
	for (size_t i = 0; i < r->n_units && !st; i++) {
		out_file *o = r->units[i].at >= r->val_from ? &r->val : &r->train;
		uint32_t eos = (uint32_t)r->eos;

		st = write_ids(o, outs[i].ids, outs[i].n, r->elem);
		if (!st && r->units[i].doc_end && r->eos >= 0)
			st = write_ids(o, &eos, 1, r->elem);
	}
	r->done = r->units[n - 1].at + (int64_t)r->units[n - 1].len;
	r->n_units = 0;
	r->pending = 0;
	progress(r, 0);
out_free:
	if (outs)
		for (size_t i = 0; i < n; i++)
			free(outs[i].ids);
	free(outs);
	free(texts);
	free(lens);
	return st;
}

static weft_status add_unit(run *r, const char *text, size_t len, int64_t at, int doc_end)
{
	/* a batch: many small documents, or a few pieces per thread */
	if (r->n_units == r->cap_units || r->pending >= (size_t)r->threads * PIECE_BYTES * 4) {
		weft_status st = flush(r);

		if (st)
			return st;
	}
	r->units[r->n_units++] = (unit){ .text = text, .len = len, .at = at, .doc_end = doc_end };
	r->pending += len;
	return WEFT_OK;
}

/* A span of a document: pieces of about PIECE_BYTES, cut where encoding
 * apart changes nothing; `doc_end` when it ends the document. */
static weft_status add_span(run *r, const char *text, size_t len, int64_t at, int doc_end)
{
	size_t ends[64], start = 0;

	while (start < len) {
		size_t n = weft_tokenizer_split(r->tok, text + start, len - start, PIECE_BYTES, ends,
						64);
		size_t piece_start = 0;

		for (size_t k = 0; k < n; k++) {
			int last = doc_end && k + 1 == n && start + ends[k] == len;
			weft_status st = add_unit(r, text + start + piece_start, ends[k] - piece_start,
						  at + (int64_t)(start + piece_start), last);

			if (st)
				return st;
			piece_start = ends[k];
		}
		start += ends[n - 1];
	}
	return WEFT_OK;
}

/* One document; one that spans the validation split is cut at the first
 * cut point from the split on, so a single long text splits too. */
static weft_status add_doc(run *r, const char *text, size_t len, int64_t at)
{
	if (at < r->val_from && r->val_from < at + (int64_t)len) {
		size_t cut = weft_tokenizer_cut_point(r->tok, text, len, (size_t)(r->val_from - at));
		weft_status st;

		if (cut > 0) {
			st = add_span(r, text, cut, at, 0);
			return st ? st : add_span(r, text + cut, len - cut, at + (int64_t)cut, 1);
		}
	}
	return add_span(r, text, len, at, 1);
}

static weft_status add_file(run *r, char *text, size_t len, int64_t at, const char *delim)
{
	size_t dl = delim ? strlen(delim) : 0, start = 0;

	if (!dl)
		return len ? add_doc(r, text, len, at) : WEFT_OK;
	while (start < len) {
		const char *hit = memmem(text + start, len - start, delim, dl);
		size_t end = hit ? (size_t)(hit - text) : len;
		weft_status st = end > start ? add_doc(r, text + start, end - start,
							at + (int64_t)start)
					     : WEFT_OK;

		if (st)
			return st;
		start = hit ? end + dl : len;
	}
	return WEFT_OK;
}

/* C escapes of --doc-delimiter, in place. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (*s == '\\' && s[1]) {
			s++;
			*o++ = *s == 'n' ? '\n' : *s == 't' ? '\t' : *s == 'r' ? '\r' : *s;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

static void val_path_for(const char *train, char *out, size_t cap)
{
	const char *base = strrchr(train, '/'), *hit = NULL, *p;
	const char *dot;

	base = base ? base + 1 : train;
	for (p = strstr(base, "train"); p; p = strstr(p + 1, "train"))
		hit = p;
	if (hit) {
		snprintf(out, cap, "%.*sval%s", (int)(hit - train), train, hit + 5);
		return;
	}
	dot = strrchr(base, '.');
	if (dot)
		snprintf(out, cap, "%.*s_val%s", (int)(dot - train), train, dot);
	else
		snprintf(out, cap, "%s_val", train);
}

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "weft tokenize: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see weft tokenize --help)\n");
	return 2;
}

int weft_cmd_tokenize(int argc, char **argv)
{
	const char *tok_path = NULL, *eos_name = NULL;
	char *delim = NULL, val_path[1024];
	const char **files;
	int n_files = 0, no_eos = 0, rc = 1;
	double vf = 0;
	long threads = sysconf(_SC_NPROCESSORS_ONLN);
	weft_tokenizer *tok = NULL;
	run r = { 0 };
	weft_status st = WEFT_OK;

	files = calloc((size_t)argc, sizeof(*files));
	if (!files)
		return 1;
	val_path[0] = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int has = i + 1 < argc;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			free(files);
			return 0;
		} else if (!strcmp(a, "--tokenizer") && has) {
			tok_path = argv[++i];
		} else if (!strcmp(a, "--out") && has) {
			r.train.path = argv[++i];
		} else if (!strcmp(a, "--val-out") && has) {
			snprintf(val_path, sizeof(val_path), "%s", argv[++i]);
		} else if (!strcmp(a, "--val-fraction") && has) {
			char *end;

			vf = strtod(argv[++i], &end);
			if (*end || !(vf >= 0 && vf < 1)) {
				free(files);
				return bad_usage("--val-fraction must be a number in [0, 1), got '%s'",
						 argv[i]);
			}
		} else if (!strcmp(a, "--threads") && has) {
			char *end;

			threads = strtol(argv[++i], &end, 10);
			if (*end || threads < 1 || threads > MAX_THREADS) {
				free(files);
				return bad_usage("--threads must be 1 to 256, got '%s'", argv[i]);
			}
		} else if (!strcmp(a, "--doc-delimiter") && has) {
			delim = argv[++i];
			unescape(delim);
		} else if (!strcmp(a, "--eos") && has) {
			eos_name = argv[++i];
		} else if (!strcmp(a, "--no-eos")) {
			no_eos = 1;
		} else if (!strcmp(a, "--quiet")) {
			r.quiet = 1;
		} else if (a[0] == '-' && a[1]) {
			free(files);
			return bad_usage("unknown option or missing value: '%s'", a);
		} else {
			files[n_files++] = a;
		}
	}
	if (!tok_path || !r.train.path || n_files == 0) {
		free(files);
		return bad_usage("%s", !tok_path ? "needs --tokenizer tokenizer.json"
				 : !r.train.path ? "needs --out FILE (the training token file)"
						 : "needs at least one text file to encode");
	}
	if (threads < 1)
		threads = 1;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	st = weft_tokenizer_load(tok_path, &tok);
	if (st)
		goto out;
	r.tok = tok;
	r.threads = (int)threads;
	r.elem = weft_tokenizer_vocab_size(tok) <= 65536 ? 2 : 4;
	r.eos = -1;
	if (eos_name) {
		r.eos = weft_tokenizer_token_id(tok, eos_name);
		if (r.eos < 0) {
			st = weft_error_set(WEFT_ERR_INVALID_ARG, "--eos '%s' is no token of '%s'",
					    eos_name, tok_path);
			goto out;
		}
	} else if (!no_eos) {
		r.eos = weft_tokenizer_eos_id(tok);
		if (r.eos < 0) {
			st = weft_error_set(WEFT_ERR_INVALID_ARG, "tokenizer '%s' has no end-of-text "
					    "token (<|endoftext|>, <|end_of_text|>, </s>, <|im_end|> "
					    "or <eos>, special); name the one that ends a document "
					    "with --eos TOKEN, or pass --no-eos", tok_path);
			goto out;
		}
	}
	for (int i = 0; i < n_files; i++) {
		int fd;
		int64_t size;

		st = weft_file_open_read(files[i], "text file", &fd, &size);
		if (st)
			goto out;
		close(fd);
		r.total += size;
	}
	if (r.total == 0) {
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "the text files ('%s'%s) are empty: "
				    "nothing to tokenize", files[0], n_files > 1 ? " and others" : "");
		goto out;
	}
	r.val_from = vf > 0 ? r.total - (int64_t)((double)r.total * vf) : INT64_MAX;
	if (vf > 0) {
		if (!val_path[0])
			val_path_for(r.train.path, val_path, sizeof(val_path));
		if (!strcmp(val_path, r.train.path)) {
			st = weft_error_set(WEFT_ERR_INVALID_ARG, "--val-out '%s' is the training "
					    "file too; give another path", val_path);
			goto out;
		}
		r.val.path = val_path;
	}
	r.cap_units = 1 << 14;
	r.units = calloc(r.cap_units, sizeof(*r.units));
	if (!r.units) {
		st = weft_error_set(WEFT_ERR_NOMEM, "out of memory tokenizing");
		goto out;
	}
	for (int i = 0; i < r.threads; i++) {
		st = weft_tokenizer_encoder_create(tok, &r.enc[i]);
		if (st)
			goto out;
	}
	st = open_out(&r.train, r.elem);
	if (!st && r.val.path)
		st = open_out(&r.val, r.elem);
	if (st)
		goto out;
	r.tty = isatty(2);
	r.t0 = now();
	{
		int64_t at = 0;

		for (int i = 0; i < n_files && !st; i++) {
			char *text;
			size_t len;

			st = weft_file_read(files[i], WEFT_MEM_OTHER, &text, &len);
			if (st)
				break;
			st = add_file(&r, text, len, at, delim);
			if (!st)
				st = flush(&r); /* the file's text is freed next */
			weft_mem_free(text);
			at += (int64_t)len;
			r.done = at;
		}
	}
	if (st)
		goto out;
	progress(&r, 1);
	st = close_out(&r.train, r.elem);
	if (!st && r.val.path)
		st = close_out(&r.val, r.elem);
	if (st)
		goto out;
	if (r.train.count == 0 || (r.val.path && r.val.count == 0)) {
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "%s got no tokens (the text holds no "
				    "cut point near the %g split, or is too short); %s",
				    r.train.count == 0 ? r.train.path : r.val.path, vf,
				    r.train.count == 0 ? "lower --val-fraction" :
				    "raise --val-fraction or give more text");
		goto out;
	}
	{
		double secs = now() - r.t0;

		printf("wrote %" PRId64 " tokens to %s", r.train.count, r.train.path);
		if (r.val.path)
			printf(" and %" PRId64 " to %s", r.val.count, r.val.path);
		printf(" (uint%d, vocabulary %" PRId64 "): %.1f MB in %.2f s, %.1f MB/s on %d "
		       "thread%s\n", 8 * r.elem, weft_tokenizer_vocab_size(tok),
		       1e-6 * (double)r.total, secs, secs > 0 ? 1e-6 * (double)r.total / secs : 0,
		       r.threads, r.threads > 1 ? "s" : "");
	}
	rc = 0;
out:
	if (r.train.f)
		fclose(r.train.f);
	if (r.val.f)
		fclose(r.val.f);
	for (int i = 0; i < r.threads; i++)
		weft_tokenizer_encoder_free(r.enc[i]);
	weft_tokenizer_free(tok);
	free(r.units);
	free(files);
	if (st) {
		/* no half-written token file is left behind */
		if (rc && r.train.path)
			unlink(r.train.path);
		if (rc && r.val.path)
			unlink(r.val.path);
		return weft_cli_fail();
	}
	return rc;
}
