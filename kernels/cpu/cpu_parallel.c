/* Splitting a kernel's index range over the CPU threads. */
#include <pthread.h>

#include "cpu_impl.h"
#include "kernels_cpu.h"

#define PAR_MAX_THREADS 64
#define PAR_ALIGN 16 /* part boundaries on multiples of 16 (a 64-byte line of floats) */

typedef struct par_part {
	cpu_range_fn fn;
	void *arg;
	int64_t begin, end;
} par_part;

static void *par_main(void *p)
{
	par_part *w = p;

	w->fn(w->arg, w->begin, w->end);
	return NULL;
}

void cpu_parallel_for(int64_t n, int64_t grain, cpu_range_fn fn, void *arg)
{
	pthread_t tid[PAR_MAX_THREADS];
	par_part w[PAR_MAX_THREADS];
	int started[PAR_MAX_THREADS] = { 0 };
	int64_t parts = weft_kernels_cpu_get_threads(), prev = 0;

	if (n <= 0)
		return;
	if (grain < 1)
		grain = 1;
	if (parts > n / grain)
		parts = n / grain;
	if (parts > PAR_MAX_THREADS)
		parts = PAR_MAX_THREADS;
	if (parts < 2) {
		fn(arg, 0, n);
		return;
	}
	for (int64_t t = 0; t < parts; t++) {
		int64_t end = t == parts - 1 ? n : (n / parts * (t + 1)) / PAR_ALIGN * PAR_ALIGN;

		w[t] = (par_part){ .fn = fn, .arg = arg, .begin = prev, .end = end > prev ? end : prev };
		prev = w[t].end;
		if (t > 0)
			started[t] = pthread_create(&tid[t], NULL, par_main, &w[t]) == 0;
	}
	fn(arg, w[0].begin, w[0].end);
	for (int64_t t = 1; t < parts; t++) {
		if (started[t])
			pthread_join(tid[t], NULL);
		else
			fn(arg, w[t].begin, w[t].end);
	}
}
