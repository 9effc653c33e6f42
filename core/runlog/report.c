/* The start banner, the model summary table and summary.json. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "runlog/report.h"

#define RULE_WIDTH 100

static const char *s_or_q(const char *s)
{
	return s ? s : "?";
}

static void rule(FILE *out, int width)
{
	for (int i = 0; i < width; i++)
		fputc('-', out);
	fputc('\n', out);
}

void weft_print_banner(FILE *out, const weft_run_banner *b)
{
	int cuda = b->accelerator && strcmp(b->accelerator, "cuda") == 0;

	fprintf(out, "GPU available: %s%s, used: %s\n", b->gpu_available ? "True" : "False",
		b->gpu_available ? " (cuda)" : "", cuda ? "True" : "False");
	fprintf(out, "Accelerator: %s, devices: %" PRId64 ", nodes: %" PRId64, s_or_q(b->accelerator),
		b->devices, b->num_nodes);
	if (b->precision)
		fprintf(out, ", precision: %s", b->precision);
	if (b->cpu_threads > 0)
		fprintf(out, ", threads per device: %" PRId64, b->cpu_threads);
	fputc('\n', out);
	if (b->world_size > 1)
		fprintf(out, "Initializing distributed: GLOBAL_RANK: %" PRId64 ", MEMBER: %" PRId64
			"/%" PRId64 "\n", b->global_rank, b->global_rank + 1, b->world_size);
	rule(out, RULE_WIDTH);
	fprintf(out, "strategy=%s, distributed_backend=%s\n", s_or_q(b->strategy), s_or_q(b->comm));
	fprintf(out, "All distributed processes registered. Starting with %" PRId64 " process%s\n",
		b->world_size, b->world_size == 1 ? "" : "es");
	rule(out, RULE_WIDTH);
}

const char *weft_human_count(int64_t n, char *buf, size_t len)
{
	static const char *const units[] = { "", "K", "M", "B", "T" };
	int digits = 1, groups, idx;
	double scaled;

	if (n < 0)
		n = 0;
	for (int64_t t = n; t >= 10; t /= 10)
		digits++;
	groups = (digits + 2) / 3;
	if (groups > 5)
		groups = 5;
	idx = groups - 1;
	scaled = (double)n / pow(1000.0, idx);
	if (idx == 0)
		snprintf(buf, len, "%" PRId64, n);
	else if (scaled >= 100)
		snprintf(buf, len, "%lld %s", (long long)scaled, units[idx]);
	else
		snprintf(buf, len, "%.1f %s", scaled, units[idx]);
	return buf;
}

void weft_print_model_summary(FILE *out, const weft_summary_row *rows, size_t n,
			      int64_t trainable, int64_t non_trainable, int64_t param_bytes)
{
	int wi = 1, wn = 4, wt = 4, wp = 6, width;
	char cnt[32], idx[24];

	for (size_t i = 0; i < n; i++) {
		int l;

		snprintf(idx, sizeof(idx), "%zu", i);
		l = (int)strlen(idx);
		wi = l > wi ? l : wi;
		l = (int)strlen(s_or_q(rows[i].name));
		wn = l > wn ? l : wn;
		l = (int)strlen(s_or_q(rows[i].type));
		wt = l > wt ? l : wt;
		l = (int)strlen(weft_human_count(rows[i].params, cnt, sizeof(cnt)));
		wp = l > wp ? l : wp;
	}
	width = wi + 3 + wn + 3 + wt + 3 + wp;
	fprintf(out, "%*s | %-*s | %-*s | %-*s\n", wi, "", wn, "Name", wt, "Type", wp, "Params");
	rule(out, width);
	for (size_t i = 0; i < n; i++) {
		snprintf(idx, sizeof(idx), "%zu", i);
		fprintf(out, "%-*s | %-*s | %-*s | %-*s\n", wi, idx, wn, s_or_q(rows[i].name), wt,
			s_or_q(rows[i].type), wp,
			weft_human_count(rows[i].params, cnt, sizeof(cnt)));
	}
	rule(out, width);
	fprintf(out, "%-10s Trainable params\n", weft_human_count(trainable, cnt, sizeof(cnt)));
	fprintf(out, "%-10s Non-trainable params\n",
		weft_human_count(non_trainable, cnt, sizeof(cnt)));
	fprintf(out, "%-10s Total params\n",
		weft_human_count(trainable + non_trainable, cnt, sizeof(cnt)));
	fprintf(out, "%-10.3f Total estimated model params size (MB)\n", (double)param_bytes / 1e6);
}

static void metrics_object(weft_json_writer *w, const char *key, const weft_metric *m, size_t n)
{
	weft_json_key(w, key);
	weft_json_begin_object(w);
	for (size_t i = 0; i < n; i++) {
		weft_json_key(w, m[i].name);
		weft_json_number(w, m[i].value);
	}
	weft_json_end_object(w);
}

/* `key`: {category: peak, "total": peak} of *m, then `rank_key`:
 * {category: rank, "total": rank} when rank is given; nothing when m is
 * NULL. */
static void peaks_object(weft_json_writer *w, const char *key, const weft_mem_stats *m,
			 const char *rank_key, const int64_t *rank)
{
	if (!m)
		return;
	weft_json_key(w, key);
	weft_json_begin_object(w);
	for (int c = 0; c < WEFT_MEM_NUM_CATEGORIES; c++) {
		weft_json_key(w, weft_mem_category_name((weft_mem_category)c));
		weft_json_int(w, m->peak[c]);
	}
	weft_json_key(w, "total");
	weft_json_int(w, m->peak_total);
	weft_json_end_object(w);
	if (!rank)
		return;
	weft_json_key(w, rank_key);
	weft_json_begin_object(w);
	for (int c = 0; c < WEFT_MEM_NUM_CATEGORIES; c++) {
		weft_json_key(w, weft_mem_category_name((weft_mem_category)c));
		weft_json_int(w, rank[c]);
	}
	weft_json_key(w, "total");
	weft_json_int(w, rank[WEFT_MEM_NUM_CATEGORIES]);
	weft_json_end_object(w);
}

weft_status weft_run_summary_write(const char *path, const weft_run_summary *s)
{
	char tmp[4200];
	weft_json_writer w;
	weft_status st;
	int bad;
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return weft_error_set(WEFT_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
	weft_json_writer_file(&w, f, 1);
	weft_json_begin_object(&w);
	weft_json_key(&w, "strategy");
	weft_json_string(&w, s->strategy);
	weft_json_key(&w, "comm");
	weft_json_string(&w, s->comm);
	weft_json_key(&w, "world_size");
	weft_json_int(&w, s->world_size);
	weft_json_key(&w, "steps");
	weft_json_int(&w, s->steps);
	weft_json_key(&w, "epochs");
	weft_json_int(&w, s->epochs);
	weft_json_key(&w, "wall_seconds");
	weft_json_number(&w, s->wall_seconds);
	metrics_object(&w, "final_metrics", s->final_metrics, s->n_final_metrics);
	weft_json_key(&w, "throughput");
	weft_json_begin_object(&w);
	weft_json_key(&w, "value");
	weft_json_number(&w, s->throughput);
	weft_json_key(&w, "unit");
	weft_json_string(&w, s->throughput_unit);
	weft_json_end_object(&w);
	metrics_object(&w, "step_time_s", s->step_time, s->n_step_time);
	if (s->n_totals)
		metrics_object(&w, "totals", s->totals, s->n_totals);
	if (s->n_pipeline)
		metrics_object(&w, "pipeline", s->pipeline, s->n_pipeline);
	peaks_object(&w, "peak_bytes", s->memory, "peak_rank", s->memory_rank);
	peaks_object(&w, "steady_peak_bytes", s->steady_memory, "steady_peak_rank",
		     s->steady_memory_rank);
	if (s->plan_bytes) {
		weft_json_key(&w, "plan_bytes");
		weft_json_begin_object(&w);
		for (int c = 0; c < WEFT_MEM_NUM_CATEGORIES; c++) {
			if (s->plan_bytes[c] < 0)
				continue;
			weft_json_key(&w, weft_mem_category_name((weft_mem_category)c));
			weft_json_int(&w, s->plan_bytes[c]);
		}
		weft_json_end_object(&w);
	}
	peaks_object(&w, "host_peak_bytes", s->host_memory, "host_peak_rank",
		     s->host_memory_rank);
	peaks_object(&w, "device_peak_bytes", s->device_memory, "device_peak_rank",
		     s->device_memory_rank);
	peaks_object(&w, "steady_host_peak_bytes", s->steady_host_memory,
		     "steady_host_peak_rank", s->steady_host_memory_rank);
	peaks_object(&w, "steady_device_peak_bytes", s->steady_device_memory,
		     "steady_device_peak_rank", s->steady_device_memory_rank);
	weft_json_end_object(&w);
	st = weft_json_finish(&w, NULL);
	bad = ferror(f);
	bad |= fclose(f) != 0;
	if (bad && !st)
		st = weft_error_set(WEFT_ERR_IO, "cannot write '%s'", tmp);
	if (st) {
		remove(tmp);
		return weft_error_wrap(st, "writing '%s'", path);
	}
	if (rename(tmp, path) != 0) {
		st = weft_error_set(WEFT_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path,
				    strerror(errno));
		remove(tmp);
	}
	return st;
}
