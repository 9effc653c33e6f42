/* Tokens per second and MFU (train/throughput.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/throughput.h"

double weft_throughput_flops_per_token(const weft_model *m, int64_t T, int64_t whole_numel)
{
	double f = weft_model_flops_per_token(m, T);
	int64_t own = weft_model_num_params(m);

	if (whole_numel > own)
		f += 6.0 * (double)(whole_numel - own);
	return f;
}

/* The value of `key` in the first "key : value" line of `text` that has
 * it, into buf; NULL when absent. */
static const char *cpuinfo_field(const char *text, const char *key, char *buf, size_t len)
{
	size_t klen = strlen(key);
	const char *next;

	for (const char *line = text; line && *line; line = next) {
		const char *p = line, *end;
		size_t n;

		next = strchr(line, '\n');
		if (next)
			next++;
		if (strncmp(p, key, klen) != 0 || (p[klen] != ' ' && p[klen] != '\t' && p[klen] != ':'))
			continue;
		p += klen;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != ':')
			continue;
		p++;
		while (*p == ' ')
			p++;
		end = strchr(p, '\n');
		n = end ? (size_t)(end - p) : strlen(p);
		if (n >= len)
			n = len - 1;
		memcpy(buf, p, n);
		buf[n] = '\0';
		return buf;
	}
	return NULL;
}

static int has_flag(const char *flags, const char *flag)
{
	size_t n = strlen(flag);

	for (const char *p = strstr(flags, flag); p; p = strstr(p + 1, flag))
		if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return 1;
	return 0;
}

double weft_cpu_peak_flops(const char *cpuinfo, int64_t threads, char *how, size_t len)
{
	char mhz_s[64], flags[4096];
	const char *isa;
	double mhz, per_cycle;

	if (!cpuinfo || !cpuinfo_field(cpuinfo, "cpu MHz", mhz_s, sizeof(mhz_s)) ||
	    (mhz = strtod(mhz_s, NULL)) <= 0) {
		snprintf(how, len, "no 'cpu MHz' in /proc/cpuinfo");
		return 0.0;
	}
	if (!cpuinfo_field(cpuinfo, "flags", flags, sizeof(flags)))
		flags[0] = '\0';
	if (has_flag(flags, "avx512f")) {
		per_cycle = 64;
		isa = "AVX-512: two 16-wide FMA pipes";
	} else if (has_flag(flags, "avx2") && has_flag(flags, "fma")) {
		per_cycle = 32;
		isa = "AVX2+FMA: two 8-wide FMA pipes";
	} else if (has_flag(flags, "avx")) {
		per_cycle = 16;
		isa = "AVX: an 8-wide add and an 8-wide multiply";
	} else {
		per_cycle = 8;
		isa = "SSE: a 4-wide add and a 4-wide multiply";
	}
	if (threads < 1)
		threads = 1;
	snprintf(how, len, "%lld thread%s x %.0f MHz x %.0f float32 FLOP/cycle (%s)",
		 (long long)threads, threads == 1 ? "" : "s", mhz, per_cycle, isa);
	return (double)threads * mhz * 1e6 * per_cycle;
}

void weft_throughput_init(weft_throughput *tp, int per_token, double flops_per_item,
			  double peak_total)
{
	*tp = (weft_throughput){ .per_token = per_token, .flops_per_item = flops_per_item,
				 .peak_total = peak_total };
}

void weft_throughput_add(weft_throughput *tp, double items, double seconds)
{
	if (!(seconds > 0))
		return;
	tp->items += items;
	tp->seconds += seconds;
	tp->step_rate = items / seconds;
}

static int have_mfu(const weft_throughput *tp)
{
	return tp->peak_total > 0 && tp->flops_per_item > 0;
}

size_t weft_throughput_metrics(const weft_throughput *tp, weft_metric *m)
{
	double avg;
	size_t n = 0;

	if (!(tp->seconds > 0))
		return 0;
	avg = tp->items / tp->seconds;
	m[n++] = (weft_metric){ tp->per_token ? "tokens_per_sec" : "samples_per_sec",
				tp->step_rate };
	m[n++] = (weft_metric){ tp->per_token ? "tokens_per_sec_avg" : "samples_per_sec_avg", avg };
	if (have_mfu(tp)) {
		m[n++] = (weft_metric){ "mfu", tp->step_rate * tp->flops_per_item / tp->peak_total };
		m[n++] = (weft_metric){ "mfu_avg", avg * tp->flops_per_item / tp->peak_total };
	}
	return n;
}

size_t weft_throughput_progress(const weft_throughput *tp, weft_metric *m)
{
	double avg;
	size_t n = 0;

	if (!(tp->seconds > 0))
		return 0;
	avg = tp->items / tp->seconds;
	m[n++] = (weft_metric){ tp->per_token ? "tokens/s" : "samples/s", avg };
	if (have_mfu(tp))
		m[n++] = (weft_metric){ "mfu", avg * tp->flops_per_item / tp->peak_total };
	return n;
}
