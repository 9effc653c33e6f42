/* Splitting a kernel's index range over the CPU threads.
 *
 * The parts run on a pool of worker threads started on first use and kept
 * (a kernel call costs a condition-variable wake instead of a thread
 * start: ~35 us a thread on the 2-vCPU development machine, some 100
 * kernel calls a gpt-small-cpu step). One call uses the pool at a time;
 * a call made while it is busy (by another thread, say two dp replicas,
 * or from inside a part) starts threads of its own, as every call did
 * before the pool. After fork() the child starts a new pool.
 *
 * Also the thread count the pool and OpenBLAS use, and each thread's
 * packing buffer (the matrix products' scratch). */
#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_impl.h"
#include "kernels_cpu.h"
#include "weft/memory.h"

#define PAR_MAX_THREADS 64
#define PAR_ALIGN 16 /* part boundaries on multiples of 16 (a 64-byte line of floats) */

typedef struct par_part {
	cpu_range_fn fn;
	void *arg;
	int64_t begin, end;
} par_part;

static struct {
	pthread_mutex_t busy;  /* held by the call using the pool */
	pthread_mutex_t mu;    /* guards what follows */
	pthread_cond_t wake, done;
	int workers;           /* started; worker w runs part w + 1 */
	uint64_t gen;          /* job number */
	uint64_t born[PAR_MAX_THREADS]; /* gen when worker w was started */
	int parts;             /* of the current job */
	int pending;           /* its parts still running on workers */
	par_part part[PAR_MAX_THREADS];
} pool = {
	.busy = PTHREAD_MUTEX_INITIALIZER,
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static _Thread_local int in_part; /* this thread runs a part now */

static void run_part(const par_part *w)
{
	int outer = in_part; /* a part of a part: still inside the outer one */

	in_part = 1;
	w->fn(w->arg, w->begin, w->end);
	in_part = outer;
}

static void *par_main(void *p)
{
	run_part(p);
	return NULL;
}

/* How long a worker, and a caller waiting for its parts, looks at the
 * pool before sleeping on its condition variable. */
#define PAR_SPIN_NS 30000

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Returns once *v != old or after PAR_SPIN_NS. */
static void spin_while_equal(const uint64_t *v, uint64_t old)
{
	int64_t end = now_ns() + PAR_SPIN_NS;

	while (__atomic_load_n(v, __ATOMIC_ACQUIRE) == old) {
		for (int i = 0; i < 32; i++)
			cpu_relax();
		if (now_ns() > end)
			return;
	}
}

static void *pool_main(void *p)
{
	int idx = (int)(intptr_t)p + 1; /* the part this worker runs */
	uint64_t seen;

	pthread_mutex_lock(&pool.mu);
	seen = pool.born[idx - 1]; /* the job that started it is after this */
	for (;;) {
		par_part w;

		if (pool.gen == seen) {
			/* the next kernel call often follows within microseconds:
			 * look for it a little before sleeping */
			pthread_mutex_unlock(&pool.mu);
			spin_while_equal(&pool.gen, seen);
			pthread_mutex_lock(&pool.mu);
		}
		while (pool.gen == seen)
			pthread_cond_wait(&pool.wake, &pool.mu);
		seen = pool.gen;
		if (idx >= pool.parts)
			continue; /* not needed this time */
		w = pool.part[idx];
		pthread_mutex_unlock(&pool.mu);
		run_part(&w);
		pthread_mutex_lock(&pool.mu);
		if (__atomic_sub_fetch(&pool.pending, 1, __ATOMIC_RELEASE) == 0)
			pthread_cond_signal(&pool.done);
	}
	return NULL;
}

/* In a child of fork() the workers are gone: start a new pool. */
static void pool_atfork_child(void)
{
	pthread_mutex_init(&pool.busy, NULL);
	pthread_mutex_init(&pool.mu, NULL);
	pthread_cond_init(&pool.wake, NULL);
	pthread_cond_init(&pool.done, NULL);
	pool.workers = 0;
	pool.parts = 0;
	pool.pending = 0;
}

static void pool_init(void)
{
	pthread_atfork(NULL, NULL, pool_atfork_child);
}

/* Threads of its own for each part but the first (the pool is busy). */
static void run_spawned(par_part *w, int64_t parts)
{
	pthread_t tid[PAR_MAX_THREADS];
	int started[PAR_MAX_THREADS] = { 0 };

	for (int64_t t = 1; t < parts; t++)
		started[t] = pthread_create(&tid[t], NULL, par_main, &w[t]) == 0;
	run_part(&w[0]);
	for (int64_t t = 1; t < parts; t++) {
		if (started[t])
			pthread_join(tid[t], NULL);
		else
			run_part(&w[t]);
	}
}

/* Parts [0, parts) on the pool, part 0 on this thread; parts the pool
 * has no worker for (one could not be started) run here too. */
static void run_pooled(const par_part *w, int64_t parts)
{
	pthread_attr_t attr;
	pthread_t tid;
	int64_t have;

	pthread_mutex_lock(&pool.mu);
	if (pool.workers < parts - 1 && pthread_attr_init(&attr) == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		while (pool.workers < parts - 1) {
			pool.born[pool.workers] = pool.gen;
			if (pthread_create(&tid, &attr, pool_main, (void *)(intptr_t)pool.workers))
				break;
			pool.workers++;
		}
		pthread_attr_destroy(&attr);
	}
	have = pool.workers + 1 < parts ? pool.workers + 1 : parts;
	for (int64_t t = 0; t < have; t++)
		pool.part[t] = w[t];
	pool.parts = (int)have;
	pool.pending = (int)have - 1;
	__atomic_store_n(&pool.gen, pool.gen + 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&pool.wake);
	pthread_mutex_unlock(&pool.mu);

	run_part(&w[0]);
	for (int64_t t = have; t < parts; t++)
		run_part(&w[t]);

	{
		int64_t end = now_ns() + PAR_SPIN_NS;

		while (__atomic_load_n(&pool.pending, __ATOMIC_ACQUIRE) > 0 && now_ns() < end)
			for (int i = 0; i < 32; i++)
				cpu_relax();
	}
	pthread_mutex_lock(&pool.mu);
	while (pool.pending > 0)
		pthread_cond_wait(&pool.done, &pool.mu);
	pthread_mutex_unlock(&pool.mu);
}

/* Runs parts w[0, parts) at once, w[0] on this thread. */
static void run_parts(par_part *w, int64_t parts)
{
	if (parts < 2) {
		if (parts == 1)
			run_part(&w[0]);
		return;
	}
	pthread_once(&pool_once, pool_init);
	if (!in_part && pthread_mutex_trylock(&pool.busy) == 0) {
		run_pooled(w, parts);
		pthread_mutex_unlock(&pool.busy);
	} else {
		run_spawned(w, parts);
	}
}

void cpu_parallel_for(int64_t n, int64_t grain, cpu_range_fn fn, void *arg)
{
	par_part w[PAR_MAX_THREADS];
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
	}
	run_parts(w, parts);
}

int64_t cpu_parallel_tasks(int64_t n, cpu_range_fn fn, void *arg)
{
	par_part w[PAR_MAX_THREADS];

	if (n > PAR_MAX_THREADS)
		n = PAR_MAX_THREADS;
	for (int64_t t = 0; t < n; t++)
		w[t] = (par_part){ .fn = fn, .arg = arg, .begin = t, .end = t + 1 };
	run_parts(w, n);
	return n < 0 ? 0 : n;
}

void weft_kernels_cpu_parallel_for(int64_t n, int64_t grain,
				   void (*fn)(void *arg, int64_t begin, int64_t end), void *arg)
{
	cpu_parallel_for(n, grain, fn, arg);
}

/* ---- the thread count (OpenBLAS's and the pool's) ---- */

static atomic_llong cpu_threads;

void weft_kernels_cpu_set_threads(int64_t n)
{
	if (n < 1)
		n = 1;
	if (n > 4096)
		n = 4096;
	openblas_set_num_threads((int)n);
	atomic_store(&cpu_threads, (long long)n);
}

int64_t weft_kernels_cpu_get_threads(void)
{
	long long n = atomic_load(&cpu_threads);

	return n > 0 ? (int64_t)n : (int64_t)openblas_get_num_threads();
}

/* ---- per-thread packing buffers ---- */

static pthread_key_t pack_key;
static pthread_once_t pack_once = PTHREAD_ONCE_INIT;

typedef struct pack_buf {
	void *p[CPU_BUF_COUNT];
	size_t size[CPU_BUF_COUNT];
} pack_buf;

static void pack_free(void *v)
{
	pack_buf *b = v;

	for (int i = 0; i < CPU_BUF_COUNT; i++)
		weft_mem_free(b->p[i]);
	free(b);
}

static int pack_key_ok;

static void pack_key_init(void)
{
	pack_key_ok = pthread_key_create(&pack_key, pack_free) == 0;
}

void *cpu_thread_buffer(int slot, size_t bytes)
{
	pack_buf *b;

	pthread_once(&pack_once, pack_key_init);
	if (!pack_key_ok)
		return NULL;
	b = pthread_getspecific(pack_key);
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b || pthread_setspecific(pack_key, b)) {
			free(b);
			return NULL;
		}
	}
	if (bytes > b->size[slot]) {
		void *p = weft_mem_alloc(WEFT_MEM_OTHER, bytes);

		if (!p)
			return NULL;
		weft_mem_free(b->p[slot]);
		b->p[slot] = p;
		b->size[slot] = bytes;
	}
	return b->p[slot];
}
