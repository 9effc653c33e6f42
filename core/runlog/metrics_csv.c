/* metrics.csv: rows kept in memory as (column, value) cells, written as
 * they come, the whole file rewritten when a new column appears. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runlog/metrics_csv.h"

typedef struct cell {
	uint32_t col;
	double value;
} cell;

typedef struct row {
	int64_t step;
	size_t first, n; /* cells[first .. first + n) */
} row;

struct weft_csv_logger {
	char path[4096];
	FILE *f;
	char **cols;
	size_t ncols, cap_cols;
	row *rows;
	size_t nrows, cap_rows;
	cell *cells;
	size_t ncells, cap_cells;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t nc;
	void *np;

	if (need <= *cap)
		return 1;
	nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	np = realloc(*p, nc * elem);
	if (!np)
		return 0;
	*p = np;
	*cap = nc;
	return 1;
}

static void put_field(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\n\r")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void put_header(weft_csv_logger *l, FILE *f)
{
	fputs("step", f);
	for (size_t i = 0; i < l->ncols; i++) {
		fputc(',', f);
		put_field(f, l->cols[i]);
	}
	fputc('\n', f);
}

static void put_row(weft_csv_logger *l, FILE *f, const row *r)
{
	fprintf(f, "%" PRId64, r->step);
	for (size_t c = 0; c < l->ncols; c++) {
		fputc(',', f);
		for (size_t i = 0; i < r->n; i++) {
			const cell *ce = &l->cells[r->first + i];

			if (ce->col != c)
				continue;
			/* 9 significant digits round-trip any float32. */
			if (isfinite(ce->value))
				fprintf(f, "%.9g", ce->value);
			else
				fputs(isnan(ce->value) ? "nan" : ce->value > 0 ? "inf" : "-inf", f);
			break;
		}
	}
	fputc('\n', f);
}

static weft_status io_error(weft_csv_logger *l, const char *what)
{
	return weft_error_set(WEFT_ERR_IO, "cannot %s metrics file '%s': %s", what, l->path,
			      strerror(errno));
}

weft_status weft_csv_logger_open(const char *path, weft_csv_logger **out)
{
	weft_csv_logger *l = calloc(1, sizeof(*l));

	*out = NULL;
	if (!l)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory opening '%s'", path);
	snprintf(l->path, sizeof(l->path), "%s", path);
	l->f = fopen(path, "w");
	if (!l->f) {
		weft_status st = io_error(l, "create");

		free(l);
		return st;
	}
	*out = l;
	return WEFT_OK;
}

/* Writes every row to path.tmp and renames it over the file. */
static weft_status rewrite(weft_csv_logger *l)
{
	char tmp[4200];
	int bad;
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", l->path);
	f = fopen(tmp, "w");
	if (!f)
		return weft_error_set(WEFT_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
	put_header(l, f);
	for (size_t i = 0; i < l->nrows; i++)
		put_row(l, f, &l->rows[i]);
	bad = ferror(f);
	bad |= fclose(f) != 0;
	if (bad) {
		remove(tmp);
		return weft_error_set(WEFT_ERR_IO, "cannot write '%s'", tmp);
	}
	if (fclose(l->f) != 0) {
		l->f = NULL;
		remove(tmp);
		return io_error(l, "close");
	}
	l->f = NULL;
	if (rename(tmp, l->path) != 0)
		return io_error(l, "replace");
	l->f = fopen(l->path, "a");
	if (!l->f)
		return io_error(l, "reopen");
	return WEFT_OK;
}

weft_status weft_csv_log(weft_csv_logger *l, int64_t step, const weft_metric *m, size_t n)
{
	size_t old_cols = l->ncols;
	row *r;

	if (!l->f)
		return weft_error_set(WEFT_ERR_IO, "metrics file '%s' is not open after an earlier "
				      "error", l->path);
	if (!grow((void **)&l->cells, &l->cap_cells, l->ncells + n, sizeof(cell)) ||
	    !grow((void **)&l->rows, &l->cap_rows, l->nrows + 1, sizeof(row)))
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory logging metrics");
	for (size_t i = 0; i < n; i++) {
		if (!m[i].name || !m[i].name[0] || strcmp(m[i].name, "step") == 0)
			return weft_error_set(WEFT_ERR_INVALID_ARG,
					      "metric name %zu is empty or 'step' (reserved for "
					      "the step column)", i);
		for (size_t j = 0; j < i; j++)
			if (strcmp(m[i].name, m[j].name) == 0)
				return weft_error_set(WEFT_ERR_INVALID_ARG,
						      "metric '%s' appears twice in one row",
						      m[i].name);
	}
	for (size_t i = 0; i < n; i++) {
		size_t c;

		for (c = 0; c < l->ncols; c++)
			if (strcmp(l->cols[c], m[i].name) == 0)
				break;
		if (c == l->ncols) {
			char *dup = strdup(m[i].name);

			if (!dup || !grow((void **)&l->cols, &l->cap_cols, l->ncols + 1,
					  sizeof(char *))) {
				free(dup);
				return weft_error_set(WEFT_ERR_NOMEM, "out of memory logging metrics");
			}
			l->cols[l->ncols++] = dup;
		}
		l->cells[l->ncells + i] = (cell){ .col = (uint32_t)c, .value = m[i].value };
	}
	r = &l->rows[l->nrows++];
	*r = (row){ .step = step, .first = l->ncells, .n = n };
	l->ncells += n;
	if (l->ncols != old_cols || l->nrows == 1)
		return rewrite(l);
	put_row(l, l->f, r);
	if (ferror(l->f))
		return io_error(l, "write");
	return WEFT_OK;
}

weft_status weft_csv_flush(weft_csv_logger *l)
{
	if (l->f && fflush(l->f) != 0)
		return io_error(l, "flush");
	return WEFT_OK;
}

weft_status weft_csv_logger_close(weft_csv_logger *l)
{
	weft_status st = WEFT_OK;

	if (!l)
		return WEFT_OK;
	if (l->f) {
		int bad = ferror(l->f);

		bad |= fclose(l->f) != 0;
		if (bad)
			st = io_error(l, "finish");
	}
	for (size_t i = 0; i < l->ncols; i++)
		free(l->cols[i]);
	free(l->cols);
	free(l->rows);
	free(l->cells);
	free(l);
	return st;
}
