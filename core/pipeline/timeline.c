/* The per-rank timeline and its Chrome trace (timeline.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "pipeline/timeline.h"
#include "weft/memory.h"
#include "weft/step.h"

/* One interval as it travels: step, track, kind, micro, stage, t0, t1
 * (ns since the rank's zero), CPU ns (< 0: not measured). */
#define REC 8

struct weft_timeline {
	const weft_comm_ops *ops;
	weft_comm *comm;
	int32_t rank, world;
	int64_t zero_ns;        /* the common clock's zero on this rank */
	int64_t *rec;           /* [n * REC] */
	size_t n, cap;
};

static const char *const kind_names[WEFT_EVENT_KIND_COUNT] = {
	[WEFT_EVENT_STEP] = "step",           [WEFT_EVENT_FORWARD] = "forward",
	[WEFT_EVENT_BACKWARD] = "backward",   [WEFT_EVENT_SEND_ACT] = "send_act",
	[WEFT_EVENT_RECV_ACT] = "recv_act",   [WEFT_EVENT_SEND_GRAD] = "send_grad",
	[WEFT_EVENT_RECV_GRAD] = "recv_grad", [WEFT_EVENT_OPTIMIZER] = "optimizer",
	[WEFT_EVENT_SYNC] = "sync",
};

const char *weft_timeline_kind_name(int32_t kind)
{
	return kind >= 0 && kind < WEFT_EVENT_KIND_COUNT ? kind_names[kind] : "?";
}

#define ALIGN_ROUNDS 7

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The common clock is rank 0's. Each round every rank leaves a barrier,
 * reads its clock and all-gathers it; rank r's offset to rank 0 is the
 * median over rounds of (its reading - rank 0's), so a round where a rank
 * was descheduled between the barrier and its reading does not count.
 * The zero is rank 0's last reading, in each rank's own clock. */
static weft_status align(weft_timeline *tl)
{
	int64_t *all, mine, off[ALIGN_ROUNDS], last0 = 0;
	weft_status st = WEFT_OK;

	if (!tl->comm) {
		tl->zero_ns = weft_clock_ns();
		return WEFT_OK;
	}
	all = weft_mem_calloc(WEFT_MEM_OTHER, (size_t)tl->world * sizeof(int64_t));
	if (!all)
		return weft_error_set(WEFT_ERR_NOMEM, "timeline: out of memory");
	for (int k = 0; k < ALIGN_ROUNDS && !st; k++) {
		weft_comm_buf s = { .data = &mine, .count = 1, .dtype = WEFT_COMM_I64 };
		weft_comm_buf r = { .data = all, .count = tl->world, .dtype = WEFT_COMM_I64 };

		st = tl->ops->barrier(tl->comm, NULL);
		mine = weft_clock_ns();
		if (!st)
			st = tl->ops->all_gather(tl->comm, &s, &r, NULL);
		off[k] = mine - all[0];
		last0 = all[0];
	}
	weft_mem_free(all);
	if (st)
		return weft_error_wrap(st, "timeline: aligning the ranks' clocks");
	qsort(off, ALIGN_ROUNDS, sizeof(off[0]), cmp_i64);
	tl->zero_ns = last0 + off[ALIGN_ROUNDS / 2];
	return WEFT_OK;
}

weft_status weft_timeline_create(const weft_comm_ops *ops, weft_comm *comm, int32_t rank,
				 int32_t world, weft_timeline **out)
{
	weft_timeline *tl;
	weft_status st;

	*out = NULL;
	tl = weft_mem_calloc(WEFT_MEM_OTHER, sizeof(*tl));
	if (!tl)
		return weft_error_set(WEFT_ERR_NOMEM, "timeline: out of memory");
	tl->ops = comm ? ops : NULL;
	tl->comm = comm;
	tl->rank = rank;
	tl->world = comm ? world : 1;
	st = align(tl);
	if (st) {
		weft_mem_free(tl);
		return st;
	}
	*out = tl;
	return WEFT_OK;
}

weft_status weft_timeline_add(weft_timeline *tl, int64_t step, const weft_step_event *ev,
			      size_t n)
{
	if (tl->n + n > tl->cap) {
		size_t cap = tl->cap ? tl->cap : 256;
		int64_t *r;

		while (cap < tl->n + n)
			cap *= 2;
		r = weft_mem_alloc(WEFT_MEM_OTHER, cap * REC * sizeof(int64_t));
		if (!r)
			return weft_error_set(WEFT_ERR_NOMEM, "timeline: %zu intervals", cap);
		if (tl->n)
			memcpy(r, tl->rec, tl->n * REC * sizeof(int64_t));
		weft_mem_free(tl->rec);
		tl->rec = r;
		tl->cap = cap;
	}
	for (size_t i = 0; i < n; i++) {
		int64_t *r = tl->rec + (tl->n + i) * REC;

		r[0] = step;
		r[1] = ev[i].track;
		r[2] = ev[i].kind;
		r[3] = ev[i].micro;
		r[4] = ev[i].stage;
		r[5] = ev[i].t0_ns - tl->zero_ns;
		r[6] = ev[i].t1_ns - tl->zero_ns;
		r[7] = ev[i].cpu_ns;
	}
	tl->n += n;
	return WEFT_OK;
}

size_t weft_timeline_count(const weft_timeline *tl)
{
	return tl->n;
}

static void write_meta(weft_json_writer *w, const char *what, int32_t pid, int32_t tid,
		       const char *name)
{
	weft_json_begin_object(w);
	weft_json_key(w, "name");
	weft_json_string(w, what);
	weft_json_key(w, "ph");
	weft_json_string(w, "M");
	weft_json_key(w, "pid");
	weft_json_int(w, pid);
	if (tid >= 0) {
		weft_json_key(w, "tid");
		weft_json_int(w, tid);
	}
	weft_json_key(w, "args");
	weft_json_begin_object(w);
	weft_json_key(w, "name");
	weft_json_string(w, name);
	weft_json_end_object(w);
	weft_json_end_object(w);
}

static void write_event(weft_json_writer *w, int32_t pid, const int64_t *r)
{
	weft_json_begin_object(w);
	weft_json_key(w, "name");
	weft_json_string(w, weft_timeline_kind_name((int32_t)r[2]));
	weft_json_key(w, "cat");
	weft_json_string(w, r[1] == WEFT_TRACK_COMM ? "comm" : "compute");
	weft_json_key(w, "ph");
	weft_json_string(w, "X");
	weft_json_key(w, "pid");
	weft_json_int(w, pid);
	weft_json_key(w, "tid");
	weft_json_int(w, r[1]);
	weft_json_key(w, "ts");
	weft_json_number(w, (double)r[5] * 1e-3);
	weft_json_key(w, "dur");
	weft_json_number(w, (double)(r[6] - r[5]) * 1e-3);
	weft_json_key(w, "args");
	weft_json_begin_object(w);
	weft_json_key(w, "step");
	weft_json_int(w, r[0]);
	if (r[3] >= 0) {
		weft_json_key(w, "micro");
		weft_json_int(w, r[3]);
	}
	if (r[4] >= 0) {
		weft_json_key(w, "stage");
		weft_json_int(w, r[4]);
	}
	if (r[7] >= 0) {
		weft_json_key(w, "cpu_us");
		weft_json_number(w, (double)r[7] * 1e-3);
	}
	weft_json_end_object(w);
	weft_json_end_object(w);
}

/* Rank 0: the trace of every rank's records (all[r * most * REC], counts[r]). */
static weft_status write_file(const char *path, int32_t world, const int64_t *all,
			      const int64_t *counts, int64_t most)
{
	char tmp[4096];
	weft_json_writer w;
	FILE *f;
	weft_status st;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return weft_error_set(WEFT_ERR_IO, "--trace: cannot write '%s': %s; give a path in "
				      "a writable directory", tmp, strerror(errno));
	weft_json_writer_file(&w, f, 0);
	weft_json_begin_object(&w);
	weft_json_key(&w, "displayTimeUnit");
	weft_json_string(&w, "ms");
	weft_json_key(&w, "traceEvents");
	weft_json_begin_array(&w);
	for (int32_t r = 0; r < world; r++) {
		char name[32];

		snprintf(name, sizeof(name), "rank %d", (int)r);
		write_meta(&w, "process_name", r, -1, name);
		write_meta(&w, "thread_name", r, WEFT_TRACK_COMPUTE, "compute");
		write_meta(&w, "thread_name", r, WEFT_TRACK_COMM, "comm");
		for (int64_t i = 0; i < counts[r]; i++)
			write_event(&w, r, all + ((size_t)r * (size_t)most + (size_t)i) * REC);
	}
	weft_json_end_array(&w);
	weft_json_end_object(&w);
	st = weft_json_finish(&w, NULL);
	if (fputc('\n', f) == EOF && !st)
		st = weft_error_set(WEFT_ERR_IO, "--trace: cannot write '%s': %s", tmp,
				    strerror(errno));
	if (fclose(f) != 0 && !st)
		st = weft_error_set(WEFT_ERR_IO, "--trace: cannot write '%s': %s", tmp,
				    strerror(errno));
	if (!st && rename(tmp, path) != 0)
		st = weft_error_set(WEFT_ERR_IO, "--trace: cannot rename '%s' to '%s': %s", tmp,
				    path, strerror(errno));
	if (st)
		remove(tmp);
	return st;
}

weft_status weft_timeline_write_trace(weft_timeline *tl, const char *path)
{
	int64_t mine = (int64_t)tl->n, most = 0, *counts, *send = NULL, *all = NULL;
	size_t block;
	weft_status st = WEFT_OK;

	counts = weft_mem_calloc(WEFT_MEM_OTHER, (size_t)tl->world * sizeof(int64_t));
	if (!counts)
		return weft_error_set(WEFT_ERR_NOMEM, "timeline: out of memory");
	counts[tl->rank % tl->world] = mine;
	if (tl->comm) {
		weft_comm_buf s = { .data = &mine, .count = 1, .dtype = WEFT_COMM_I64 };
		weft_comm_buf r = { .data = counts, .count = tl->world, .dtype = WEFT_COMM_I64 };

		st = tl->ops->all_gather(tl->comm, &s, &r, NULL);
		if (st) {
			st = weft_error_wrap(st, "timeline: gathering interval counts");
			goto out;
		}
	}
	for (int32_t r = 0; r < tl->world; r++)
		most = counts[r] > most ? counts[r] : most;
	block = (size_t)(most ? most : 1) * REC;
	all = weft_mem_calloc(WEFT_MEM_OTHER, (size_t)tl->world * block * sizeof(int64_t));
	if (!all) {
		st = weft_error_set(WEFT_ERR_NOMEM, "timeline: %lld intervals of %d ranks",
				    (long long)most, (int)tl->world);
		goto out;
	}
	if (tl->comm) {
		weft_comm_buf s, r = { .data = all, .count = (int64_t)(block * (size_t)tl->world),
				       .dtype = WEFT_COMM_I64 };

		send = weft_mem_calloc(WEFT_MEM_OTHER, block * sizeof(int64_t));
		if (!send) {
			st = weft_error_set(WEFT_ERR_NOMEM, "timeline: out of memory");
			goto out;
		}
		if (tl->n)
			memcpy(send, tl->rec, tl->n * REC * sizeof(int64_t));
		s = (weft_comm_buf){ .data = send, .count = (int64_t)block, .dtype = WEFT_COMM_I64 };
		st = tl->ops->all_gather(tl->comm, &s, &r, NULL);
		if (st) {
			st = weft_error_wrap(st, "timeline: gathering the ranks' intervals");
			goto out;
		}
	} else if (tl->n) {
		memcpy(all, tl->rec, tl->n * REC * sizeof(int64_t));
	}
	if (tl->rank == 0)
		st = write_file(path, tl->world, all, counts, most ? most : 1);
out:
	weft_mem_free(send);
	weft_mem_free(all);
	weft_mem_free(counts);
	return st;
}

void weft_timeline_free(weft_timeline *tl)
{
	if (!tl)
		return;
	weft_mem_free(tl->rec);
	weft_mem_free(tl);
}
