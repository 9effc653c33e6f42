/* train_test.h - helpers for the trainer's tests: a scratch directory,
 * small generated datasets (npy classification, text), running the weft
 * command line with captured output, reading files back.
 *
 * Every test runs `$WEFT_BUILD_DIR/bin/weft` in its own scratch directory
 * (made under $TMPDIR, removed at the end unless WEFT_TEST_KEEP is set), so
 * runs/<name>/version_N/ never collide between tests.
 */
#ifndef WEFT_TESTS_TRAIN_TEST_H
#define WEFT_TESTS_TRAIN_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "weft_test.h"

#define TT_PATH 1024

static char tt_dir[TT_PATH];

/* Makes the scratch directory; exits when it cannot. */
static inline const char *tt_scratch(const char *name)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(tt_dir, sizeof(tt_dir), "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(tt_dir)) {
		fprintf(stderr, "cannot make a scratch directory '%s': %s\n", tt_dir, strerror(errno));
		exit(1);
	}
	return tt_dir;
}

static inline int tt_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p);
}

/* Removes the scratch directory (kept when WEFT_TEST_KEEP is set). */
static inline void tt_cleanup(void)
{
	if (!tt_dir[0])
		return;
	if (getenv("WEFT_TEST_KEEP")) {
		fprintf(stderr, "kept scratch directory %s\n", tt_dir);
		return;
	}
	nftw(tt_dir, tt_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* `rel` inside the scratch directory (a static buffer per call site is the
 * caller's; this one is overwritten by the next call). */
static inline const char *tt_path(const char *fmt, ...)
{
	static char buf[4][TT_PATH];
	static int k;
	char rel[TT_PATH];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", tt_dir, rel);
	return buf[k];
}

static inline void tt_write(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "cannot write '%s': %s\n", path, strerror(errno));
		exit(1);
	}
}

static inline void tt_write_text(const char *path, const char *text)
{
	tt_write(path, text, strlen(text));
}

/* The whole file, NUL-terminated; *len (optional) its size. NULL when it
 * cannot be read. Free with free(). */
static inline char *tt_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		if (buf) {
			buf[n] = '\0';
			if (len)
				*len = (size_t)n;
		}
	}
	fclose(f);
	return buf;
}

/* 1 when both files exist and hold the same bytes. */
static inline int tt_same_file(const char *a, const char *b)
{
	size_t la = 0, lb = 0;
	char *x = tt_read(a, &la), *y = tt_read(b, &lb);
	int same = x && y && la == lb && memcmp(x, y, la) == 0;

	if (!x || !y)
		fprintf(stderr, "cannot read '%s'\n", !x ? a : b);
	free(x);
	free(y);
	return same;
}

static inline int tt_exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

/* Runs `weft ARGS...` (NULL-terminated) in the scratch directory with
 * stdout in <tag>.out and stderr in <tag>.err there; `env` (may be NULL) is
 * one extra NAME=VALUE. Returns the exit status (128 + signal when killed).
 * The weft binary is $WEFT_BUILD_DIR/bin/weft. */
static inline int tt_weft_env(const char *tag, const char *env, ...)
{
	const char *build = getenv("WEFT_BUILD_DIR");
	char exe[TT_PATH], out[TT_PATH], err[TT_PATH];
	char *argv[64];
	int argc = 0, status = 0;
	va_list ap;
	pid_t pid;

	if (!build) {
		fprintf(stderr, "WEFT_BUILD_DIR is not set (run the test through ctest)\n");
		exit(1);
	}
	snprintf(exe, sizeof(exe), "%s/bin/weft", build);
	snprintf(out, sizeof(out), "%s/%s.out", tt_dir, tag);
	snprintf(err, sizeof(err), "%s/%s.err", tt_dir, tag);
	argv[argc++] = exe;
	va_start(ap, env);
	for (const char *a; (a = va_arg(ap, const char *)) && argc < 63;)
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "fork: %s\n", strerror(errno));
		exit(1);
	}
	if (pid == 0) {
		int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0666);
		int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0666);

		if (fo < 0 || fe < 0 || chdir(tt_dir) != 0)
			_exit(126);
		dup2(fo, 1);
		dup2(fe, 2);
		if (env)
			putenv((char *)env);
		execv(exe, argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

#define tt_weft(tag, ...) tt_weft_env(tag, NULL, __VA_ARGS__, (const char *)NULL)

/* The captured stdout / stderr of run `tag` (static buffer, "" if absent). */
static inline const char *tt_output(const char *tag, const char *stream)
{
	static char *last;
	char p[TT_PATH];

	free(last);
	snprintf(p, sizeof(p), "%s/%s.%s", tt_dir, tag, stream);
	last = tt_read(p, NULL);
	if (!last)
		last = calloc(1, 1);
	return last;
}

/* Prints a failed run's stderr so a failure explains itself. */
static inline int tt_expect_ok(const char *tag, int rc)
{
	if (rc != 0)
		fprintf(stderr, "weft run '%s' exited %d; its stderr:\n%s\n", tag, rc,
			tt_output(tag, "err"));
	return rc == 0;
}

/* ---- datasets ------------------------------------------------------------ */

/* A .npy v1.0 file of little-endian f4 or i4 with the given shape. */
static inline void tt_write_npy(const char *path, const char *descr, const int64_t *shape,
				int ndim, const void *data, size_t bytes)
{
	char hdr[256], dims[128] = "";
	size_t hl, total;
	unsigned char *buf;

	for (int i = 0; i < ndim; i++) {
		size_t l = strlen(dims);

		snprintf(dims + l, sizeof(dims) - l, "%lld,%s", (long long)shape[i],
			 i + 1 < ndim ? " " : "");
	}
	hl = (size_t)snprintf(hdr, sizeof(hdr),
			      "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr,
			      dims);
	/* magic (6) + version (2) + length (2) + header, padded to 64 with
	 * spaces and ending in a newline */
	while ((10 + hl + 1) % 64)
		hdr[hl++] = ' ';
	hdr[hl++] = '\n';
	total = 10 + hl + bytes;
	buf = malloc(total);
	if (!buf)
		exit(1);
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (unsigned char)(hl & 0xff);
	buf[9] = (unsigned char)(hl >> 8);
	memcpy(buf + 10, hdr, hl);
	memcpy(buf + 10 + hl, data, bytes);
	tt_write(path, buf, total);
	free(buf);
}

static inline uint64_t tt_rand(uint64_t *s)
{
	/* splitmix64: a fixed, portable stream for the generated data */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline float tt_randn(uint64_t *s)
{
	/* sum of 4 uniforms, centred and scaled: close enough to normal */
	double u = 0;

	for (int i = 0; i < 4; i++)
		u += (double)(tt_rand(s) >> 11) * 0x1.0p-53;
	return (float)((u - 2.0) * 1.7320508);
}

/* x.npy (n, d) float32 and y.npy (n) int32 in the scratch directory: a
 * linearly separable-ish 4-class problem (label = argmax of a fixed linear
 * map), so a small MLP learns it and the loss moves every step. */
static inline void tt_make_npy_dataset(int64_t n, int64_t d, int classes)
{
	float *x = malloc((size_t)(n * d) * sizeof(float));
	float *w = malloc((size_t)(d * classes) * sizeof(float));
	int32_t *y = malloc((size_t)n * sizeof(int32_t));
	uint64_t s = 12345;
	int64_t shape[2] = { n, d };

	if (!x || !w || !y)
		exit(1);
	for (int64_t i = 0; i < d * classes; i++)
		w[i] = tt_randn(&s);
	for (int64_t i = 0; i < n; i++) {
		float best = -1e30f;

		for (int64_t j = 0; j < d; j++)
			x[i * d + j] = tt_randn(&s);
		y[i] = 0;
		for (int c = 0; c < classes; c++) {
			float v = 0;

			for (int64_t j = 0; j < d; j++)
				v += x[i * d + j] * w[j * classes + c];
			if (v > best) {
				best = v;
				y[i] = c;
			}
		}
	}
	tt_write_npy(tt_path("x.npy"), "<f4", shape, 2, x, (size_t)(n * d) * sizeof(float));
	tt_write_npy(tt_path("y.npy"), "<i4", shape, 1, y, (size_t)n * sizeof(int32_t));
	free(x);
	free(w);
	free(y);
}

/* corpus.txt: `bytes` of word salad from a fixed vocabulary and stream,
 * with sentence structure (capitals, punctuation, newlines) so a small
 * character model has something to learn. */
static inline void tt_make_text(size_t bytes)
{
	static const char *const words[] = {
		"the", "weft", "and", "warp", "of", "a", "loom", "runs", "through", "every",
		"thread", "in", "cloth", "while", "shuttle", "moves", "across", "wide",
		"patterns", "emerge", "from", "simple", "rules", "repeated", "many", "times",
	};
	const size_t nw = sizeof(words) / sizeof(words[0]);
	char *buf = malloc(bytes + 32);
	size_t n = 0;
	uint64_t s = 777;
	int start = 1;

	if (!buf)
		exit(1);
	while (n < bytes) {
		const char *w = words[tt_rand(&s) % nw];
		size_t l = strlen(w);

		memcpy(buf + n, w, l);
		if (start)
			buf[n] = (char)(buf[n] - 'a' + 'A');
		n += l;
		start = tt_rand(&s) % 9 == 0;
		buf[n++] = start ? '.' : ' ';
		if (start)
			buf[n++] = tt_rand(&s) % 3 ? ' ' : '\n';
	}
	tt_write(tt_path("corpus.txt"), buf, bytes);
	free(buf);
}

/* metrics.csv: the value in column `col` of a row for `step`; NAN when
 * absent or empty in every such row. */
static inline double tt_csv_value(const char *csv, const char *col, int64_t step)
{
	char header[512];
	const char *line, *nl = strchr(csv, '\n');
	int want = -1, k = 0;

	if (!nl || (size_t)(nl - csv) >= sizeof(header))
		return NAN;
	memcpy(header, csv, (size_t)(nl - csv));
	header[nl - csv] = '\0';
	for (char *tok = strtok(header, ","); tok; tok = strtok(NULL, ","), k++)
		if (!strcmp(tok, col))
			want = k;
	if (want < 0)
		return NAN;
	for (line = nl + 1; *line; line = strchr(line, '\n') + 1) {
		const char *p = line;

		if (strtoll(line, NULL, 10) == step) { /* a step may have several rows */
			for (int c = 0; c < want; c++)
				p = strchr(p, ',') + 1;
			if (*p != ',' && *p != '\n' && *p)
				return strtod(p, NULL);
		}
		if (!strchr(line, '\n'))
			break;
	}
	return NAN;
}

static inline double tt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif /* WEFT_TESTS_TRAIN_TEST_H */
