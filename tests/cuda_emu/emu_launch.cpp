/* emu_launch.cpp - kernel launches of the emulated runtime. A launch is
 * checked when it is made and queued on its stream (emu_stream.cpp); when
 * it runs, every CUDA thread of a block is a fiber on the running thread,
 * blocks run one after another, and __syncthreads and warp shuffles are
 * real barriers: a fiber runs until it reaches one or ends, then the next
 * fiber runs. A barrier that never completes is reported as a deadlock.
 * A fiber starts when its thread is first scheduled and gives its stack
 * back when the thread ends, so a kernel without barriers runs its
 * threads one after another on one stack. On x86-64 fibers switch by
 * saving the callee-saved registers and the stack pointer (emu_ctx_switch
 * below: no signal mask, no system call), elsewhere with swapcontext.
 *
 * EMU_SEED=<n> shuffles, from seed n, the order of the blocks of a grid
 * and the order in which the fibers of a block run between barriers, so
 * a read of shared memory that lacks its __syncthreads sees a different
 * writer's value from one seed to the next. */
#include "emu_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include <mutex>
#include <vector>

/* initial-exec: libemucuda is loaded with the program (linked or
 * preloaded), and these are read on every kernel statement */
#define EMU_TLS __attribute__((tls_model("initial-exec")))
EMU_TLS thread_local uint3 threadIdx;
EMU_TLS thread_local uint3 blockIdx;
EMU_TLS thread_local dim3 blockDim;
EMU_TLS thread_local dim3 gridDim;

/* ---- the EMU_SEED generator (splitmix64); used under the device lock ---- */

static int seed_state = -1;
static uint64_t rng;

int emu_seeded(void)
{
	if (seed_state < 0) {
		const char *s = getenv("EMU_SEED");

		seed_state = s && *s;
		rng = seed_state ? strtoull(s, NULL, 0) : 0;
	}
	return seed_state;
}

uint64_t emu_rand(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* 0..n-1, shuffled when EMU_SEED is set. */
static void order_of(std::vector<unsigned> &v, unsigned n)
{
	v.resize(n);
	for (unsigned i = 0; i < n; i++)
		v[i] = i;
	if (!emu_seeded())
		return;
	for (unsigned i = n; i > 1; i--) {
		unsigned j = (unsigned)(emu_rand() % i);
		unsigned t = v[i - 1];

		v[i - 1] = v[j];
		v[j] = t;
	}
}

/* ---- block state and barriers ---- */

struct warp_state {
	int live = 0, arrived = 0, lanes = 0;
	unsigned gen = 0;
	float slot[2][32]; /* by barrier generation parity: one barrier per shuffle */
	/* wmma::mma_sync: the tile the first lane past the barrier computed,
	 * and the barrier generation it belongs to */
	float tile[256];
	unsigned tile_gen = ~0u;
	int tile_arrived = 0; /* lanes at the pending mma_sync */
	/* emu_warp_gather (kernels/cuda/cuda_mma.cuh): each lane's bytes and
	 * call, by barrier generation parity as the shuffles' slots, and how
	 * many lanes arrived at the gather of barrier generation xgen[par] */
	unsigned char xbuf[2][32][32];
	const char *xcall[2][32];
	int xcount[2] = { 0, 0 };
	unsigned xgen[2] = { ~0u, ~0u };
};

struct block_state {
	int live = 0, arrived = 0;
	unsigned gen = 0;
	int nthreads = 0;
	std::vector<warp_state> warps;
	const char *name = "";
	const std::function<void()> *body = nullptr;
	/* each thread's cp.async copies not yet performed (emu_async.cpp) */
	std::vector<emu_async_thread> async;
	/* the runner: the first round's threads one after another on one fiber */
	struct fiber *fibers = nullptr;
	const unsigned *turn = nullptr;
	unsigned run_pos = 0;
	int runner_demoted = 0, runner_finished = 0;
};

#if defined(__x86_64__)
/* Switches stacks: pushes the callee-saved registers, stores the stack
 * pointer in *from, loads `to` and pops the registers saved there. A new
 * fiber's stack is laid out as if it had switched away just before
 * entering its entry function (fiber_start). */
extern "C" void emu_ctx_switch(void **from, void *to);
asm(".text\n"
    ".globl emu_ctx_switch\n"
    ".hidden emu_ctx_switch\n"
    ".type emu_ctx_switch,@function\n"
    "emu_ctx_switch:\n"
    "\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
    "\tmovq %rsp, (%rdi)\n"
    "\tmovq %rsi, %rsp\n"
    "\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
    "\tret\n"
    ".size emu_ctx_switch, .-emu_ctx_switch\n");
#endif

/* A CUDA thread of the running block. */
struct fiber {
	uint3 idx; /* its threadIdx */
	int tid;
	int done;
	int started;
	unsigned slot; /* the stack it runs on */
};

/* A fiber stack's saved context while its fiber is switched out. */
struct slot_state {
#if defined(__x86_64__)
	void *sp;
#else
	ucontext_t ctx;
#endif
};

static EMU_TLS thread_local block_state *cur_block;
static EMU_TLS thread_local int cur_tid;
static EMU_TLS thread_local fiber *cur_fiber;
#if defined(__x86_64__)
static EMU_TLS thread_local void *sched_sp;
#else
static thread_local ucontext_t sched_ctx;
#endif
static thread_local char *fiber_stacks;
static thread_local slot_state *slots; /* fiber_max of them, beside the stacks */
static const size_t fiber_stack_bytes = 128 << 10;
static const unsigned fiber_max = 1024;
static std::mutex atomic_mu;

void emu_atomic_lock()
{
	atomic_mu.lock();
}

void emu_atomic_unlock()
{
	atomic_mu.unlock();
}

/* From a fiber back to the scheduler; returns when resumed. */
static void fiber_yield(void)
{
#if defined(__x86_64__)
	emu_ctx_switch(&slots[cur_fiber->slot].sp, sched_sp);
#else
	swapcontext(&slots[cur_fiber->slot].ctx, &sched_ctx);
#endif
}

/* From the scheduler into fiber f until it yields or finishes its block. */
static void fiber_resume(fiber *f)
{
	cur_fiber = f;
#if defined(__x86_64__)
	emu_ctx_switch(&sched_sp, slots[f->slot].sp);
#else
	swapcontext(&sched_ctx, &slots[f->slot].ctx);
#endif
}

static void yield_until(unsigned *gen, unsigned g)
{
	long spins = 0;

	while (*gen == g) {
		fiber_yield();
		if (++spins > 50000000L) {
			emu_report("kernel %s: a barrier never completed (a thread is stuck or took "
				   "another path): deadlock", cur_block->name);
			abort();
		}
	}
}

void emu_syncthreads()
{
	block_state *b = cur_block;

	if (++b->arrived == b->live) {
		b->arrived = 0;
		b->gen++;
		return;
	}
	yield_until(&b->gen, b->gen);
}

static void warp_bar(warp_state *w)
{
	if (++w->arrived == w->live) {
		w->arrived = 0;
		w->gen++;
		return;
	}
	yield_until(&w->gen, w->gen);
}

/* Every lane writes its value into the slots of this barrier generation's
 * parity and reads its source lane's after the barrier; a lane cannot
 * reach the next shuffle of the same parity before every lane has passed
 * the barrier in between, so one barrier per shuffle suffices. */
float emu_shfl_xor(float v, int o)
{
	block_state *b = cur_block;
	warp_state *w = &b->warps[cur_tid / 32];
	int lane = cur_tid % 32, src = lane ^ o;
	unsigned par = w->gen & 1;

	w->slot[par][lane] = v;
	warp_bar(w);
	return src < w->lanes ? w->slot[par][src] : v;
}

/* ---- the warp matrix API's checks (cuda_emu_wmma.h) ---- */

/* What real hardware requires of a wmma load or store: the pointer 256-bit
 * aligned, ldm a multiple of 16 bytes (8 elements of a 16-bit type, 4 of
 * float). A violation is reported and ends the process, as it would end
 * the kernel on a GPU. */
void emu_wmma_check(const char *call, const void *p, unsigned ldm, size_t elem_bytes)
{
	const char *kernel = cur_block ? cur_block->name : "(none)";

	if ((uintptr_t)p % 32) {
		emu_report("kernel %s: %s: pointer %p is not 256-bit (32-byte) aligned; a wmma tile "
			   "must start on a 32-byte boundary (align the array, e.g. __align__(32) "
			   "shared memory, and offset it by whole 32-byte steps)", kernel, call, p);
		abort();
	}
	if ((ldm * elem_bytes) % 16) {
		emu_report("kernel %s: %s: ldm %u is not a multiple of %zu elements of %zu bytes; "
			   "wmma needs a leading dimension of a multiple of 16 bytes (pad the rows)",
			   kernel, call, ldm, 16 / elem_bytes, elem_bytes);
		abort();
	}
}

/* Every lane of the caller's warp arrives here (a warp barrier); the first
 * lane past it gets *first = 1 and computes the warp's tile into the
 * returned buffer, the others read it there (it is not rewritten before
 * every lane has reached the warp's next barrier). Under EMU_COUNTS the
 * warp's mma counts 2 x 16^3 FLOPs of class tc16, once. */
float *emu_wmma_collective(const char *call, int *first)
{
	block_state *b = cur_block;
	warp_state *w = &b->warps[cur_tid / 32];

	w->tile_arrived++;
	warp_bar(w);
	*first = w->tile_gen != w->gen;
	if (!*first)
		return w->tile;
	/* the first lane past the barrier, before any lane can end: a lane
	 * that returned, before or while the others waited, did not arrive */
	if (w->tile_arrived != w->lanes) {
		emu_report("kernel %s: %s: %d of warp %d's %d lanes called it, the others had "
			   "returned; every lane of the warp must take part (no lane may return "
			   "before a warp-wide matrix call)", b->name, call, w->tile_arrived,
			   cur_tid / 32, w->lanes);
		abort();
	}
	w->tile_arrived = 0;
	w->tile_gen = w->gen;
	emu_count_add_flops(2.0 * 16 * 16 * 16, "tc16");
	return w->tile;
}

/* ---- the warp-level tensor-core instructions (kernels/cuda/cuda_mma.cuh) ---- */

/* mma.sync and ldmatrix are collectives of the whole warp: each lane hands
 * in its registers (or its row address) and gets every lane's after a warp
 * barrier; the header computes its own part. The parity argument of
 * emu_shfl_xor holds: a lane copies the buffer out before it can reach the
 * next barrier. Every lane of a full warp must take part: a lane that has
 * returned (or a warp of fewer than 32 threads) is reported, as real
 * hardware leaves such a call undefined. */
void emu_warp_gather(const char *call, const void *mine, unsigned bytes, void *all,
		     double tc16_flops)
{
	block_state *b = cur_block;
	warp_state *w = &b->warps[cur_tid / 32];
	int lane = cur_tid % 32;
	unsigned par = w->gen & 1;

	if (bytes > sizeof w->xbuf[0][0]) {
		emu_report("kernel %s: %s: %u bytes per lane; the emulator gathers at most %zu "
			   "(an emulator limit: extend warp_state.xbuf)", b->name, call, bytes,
			   sizeof w->xbuf[0][0]);
		abort();
	}
	if (w->lanes != 32 || w->live != 32) {
		emu_report("kernel %s: %s: warp %d has %d of its %d lanes running; every lane of a "
			   "full warp (32 threads) must take part (no lane may return before a "
			   "warp-wide matrix instruction, and the block size must be a multiple of "
			   "32)", b->name, call, cur_tid / 32, w->live, 32);
		abort();
	}
	if (w->xgen[par] != w->gen) { /* the first lane at this gather */
		w->xgen[par] = w->gen;
		w->xcount[par] = 0;
	}
	w->xcount[par]++;
	w->xcall[par][lane] = call;
	memcpy(w->xbuf[par][lane], mine, bytes);
	warp_bar(w);
	/* a lane that returned while the others waited completed the barrier
	 * without arriving: count the arrivals; and every lane must be at the
	 * same instruction (a divergent warp pairs different calls) */
	if (w->xcount[par] != 32) {
		emu_report("kernel %s: %s: %d of warp %d's 32 lanes called it, the others had "
			   "returned or were at another warp-wide call; every lane of the warp must "
			   "take part (no lane may return before a warp-wide matrix instruction)",
			   b->name, call, w->xcount[par], cur_tid / 32);
		abort();
	}
	for (int l = 0; l < 32; l++) /* the same literal mostly: the pointers first */
		if (w->xcall[par][l] != call && strcmp(w->xcall[par][l], call)) {
			emu_report("kernel %s: lanes of warp %d are at different warp-wide calls "
				   "(lane %d at %s, lane %d at %s); every lane must execute the same "
				   "instruction (keep the call out of lane-dependent branches)",
				   b->name, cur_tid / 32, lane, call, l, w->xcall[par][l]);
			abort();
		}
	for (int l = 0; l < 32; l++)
		memcpy((unsigned char *)all + (size_t)l * bytes, w->xbuf[par][l], bytes);
	if (lane == 0 && tc16_flops > 0)
		emu_count_add_flops(tc16_flops, "tc16");
}

/* A row address of ldmatrix: 16-byte aligned, as the instruction requires
 * (a GPU faults on a misaligned one). */
void emu_ldmatrix_check(const char *call, const void *row, int lane)
{
	if ((uintptr_t)row % 16) {
		emu_report("kernel %s: %s: lane %d's row address %p is not 16-byte aligned; each "
			   "8 x 8 matrix row must start on a 16-byte boundary (pad shared-memory "
			   "rows to a multiple of 8 16-bit elements)",
			   cur_block ? cur_block->name : "(none)", call, lane, row);
		abort();
	}
}

/* The running thread's cp.async copies and its kernel's name (for
 * emu_async.cpp); NULL outside a kernel. */
emu_async_thread *emu_cur_async(const char **kernel)
{
	*kernel = cur_block ? cur_block->name : "(none)";
	return cur_block ? &cur_block->async[cur_tid] : nullptr;
}

/* Thread tid of block b has ended: its pending cp.async copies complete
 * (as they would on a GPU) and the barriers stop counting it. */
static void thread_leave(block_state *b, int tid)
{
	warp_state *w = &b->warps[tid / 32];

	emu_async_complete(&b->async[tid], ~0u);
	w->live--;
	if (w->arrived > 0 && w->arrived == w->live) {
		w->arrived = 0;
		w->gen++;
	}
	b->live--;
	if (b->arrived > 0 && b->arrived == b->live) {
		b->arrived = 0;
		b->gen++;
	}
}

/* A fiber runs one thread of one block; once done it is never resumed
 * (its stack goes to the next fiber). */
static void fiber_main(void)
{
	fiber *f = cur_fiber;

	(*cur_block->body)();
	thread_leave(cur_block, f->tid);
	f->done = 1;
	for (;;)
		fiber_yield();
}

/* The first round of a block on one fiber: each thread in turn runs to
 * its end, without a switch, until one reaches a barrier. That thread
 * keeps this fiber (the scheduler "demotes" the runner to it) and the
 * round goes on with a fiber per thread. A block without barriers thus
 * costs one fiber, whatever its size. */
static void runner_main(void)
{
	block_state *b = cur_block;

	for (unsigned k = 0; k < (unsigned)b->nthreads; k++) {
		unsigned t = b->turn[k];

		b->run_pos = k;
		cur_tid = (int)t;
		threadIdx = b->fibers[t].idx;
		b->fibers[t].started = 1;
		(*b->body)();
		thread_leave(b, (int)t);
		b->fibers[t].done = 1;
		if (b->runner_demoted)
			for (;;)
				fiber_yield();
	}
	b->runner_finished = 1;
	for (;;)
		fiber_yield();
}

static void set_thread(unsigned t, const dim3 &bl)
{
	cur_tid = (int)t;
	threadIdx.x = t % bl.x;
	threadIdx.y = (t / bl.x) % bl.y;
	threadIdx.z = t / (bl.x * bl.y);
}

static void set_block(unsigned i, const dim3 &g)
{
	blockIdx.x = i % g.x;
	blockIdx.y = (i / g.x) % g.y;
	blockIdx.z = i / (g.x * g.y);
}

static char *stack_of(unsigned slot)
{
	return fiber_stacks + (size_t)slot * fiber_stack_bytes;
}

/* Makes f a new fiber on stack `slot`, to enter `entry`. */
static void fiber_start(fiber *f, unsigned slot, void (*entry)(void))
{
	char *stack = stack_of(slot);

	f->slot = slot;
	f->started = 1;
#if defined(__SANITIZE_ADDRESS__)
	/* frames an earlier fiber left on this stack keep their redzones */
	__asan_unpoison_memory_region(stack, fiber_stack_bytes);
#endif
#if defined(__x86_64__)
	/* top (staggered by 17 cache lines per slot: equally aligned stacks
	 * would compete for the same cache sets): a zero return address for
	 * the entry, the entry (the switch's `ret`, 16-byte aligned so it
	 * starts as if called), six zeroed callee-saved registers */
	void **top = (void **)(stack + fiber_stack_bytes - (size_t)slot * 1088 % 16384 / 64 * 64);
	top[-1] = NULL;
	top[-2] = (void *)entry;
	for (int r = 3; r <= 8; r++)
		top[-r] = NULL;
	slots[slot].sp = (void *)(top - 8);
#else
	ucontext_t *ctx = &slots[slot].ctx;

	getcontext(ctx);
	ctx->uc_stack.ss_sp = stack;
	ctx->uc_stack.ss_size = fiber_stack_bytes;
	ctx->uc_link = NULL;
	makecontext(ctx, entry, 0);
#endif
}

/* Runs block i of the launch: rounds over its threads (in EMU_SEED's
 * order), each running until its next barrier or its end. The first
 * round starts on the runner; after that a thread's fiber starts at its
 * first turn and frees its stack when it ends. */
static void run_block(block_state *b, const emu_cfg_t &cfg, unsigned i, std::vector<fiber> &fs,
		      std::vector<unsigned> &turn, std::vector<unsigned> &free_slots)
{
	unsigned nt = (unsigned)b->nthreads, first = 0;
	fiber runner;

	b->live = (int)nt;
	b->arrived = 0;
	for (auto &w : b->warps) {
		w.live = w.lanes;
		w.arrived = 0;
		w.tile_gen = w.gen - 1;
		w.tile_arrived = 0;
	}
	for (auto &a : b->async) { /* empty: each thread's end completed its copies */
		a.copies.clear();
		a.committed = 0;
	}
	free_slots.clear();
	for (unsigned k = nt; k > 0; k--)
		free_slots.push_back(k - 1);
	for (unsigned t = 0; t < nt; t++) {
		fs[t].done = 0;
		fs[t].started = 0;
	}
	set_block(i, cfg.grid);
	order_of(turn, nt);
	b->fibers = fs.data();
	b->turn = turn.data();
	b->run_pos = 0;
	b->runner_demoted = 0;
	b->runner_finished = 0;
	fiber_start(&runner, free_slots.back(), runner_main);
	free_slots.pop_back();
	fiber_resume(&runner);
	if (b->runner_finished) {
		free_slots.push_back(runner.slot);
		return;
	}
	/* a thread reached a barrier on the runner: it keeps the runner's
	 * stack, and the round goes on after it */
	fiber *f = &fs[turn[b->run_pos]];
	b->runner_demoted = 1;
	f->slot = runner.slot;
	f->started = 1;
	first = b->run_pos + 1;
	for (unsigned left = 1; left;) {
		left = 0;
		for (unsigned k = first; k < nt; k++) {
			unsigned t = turn[k];

			f = &fs[t];
			if (f->done)
				continue;
			if (!f->started) {
				fiber_start(f, free_slots.back(), fiber_main);
				free_slots.pop_back();
			}
			cur_tid = (int)t;
			threadIdx = f->idx;
			fiber_resume(f);
			if (f->done)
				free_slots.push_back(f->slot);
			else
				left++;
		}
		/* the threads before `first` wait too: count them in */
		for (unsigned k = 0; k < first; k++)
			left += !fs[turn[k]].done;
		first = 0;
		order_of(turn, nt);
	}
}

void emu_kernel_exec(const emu_cfg_t &cfg, const char *name, const std::function<void()> &body)
{
	unsigned nt = cfg.block.x * cfg.block.y * cfg.block.z;
	unsigned nb = cfg.grid.x * cfg.grid.y * cfg.grid.z;
	block_state b;
	block_state *saved = cur_block;
	int saved_tid = cur_tid;
	std::vector<unsigned> blocks, turn, free_slots;
	std::vector<fiber> fs(nt);

	if (!fiber_stacks) {
		fiber_stacks = (char *)mmap(NULL, fiber_stack_bytes * fiber_max, PROT_READ | PROT_WRITE,
					    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		slots = (slot_state *)calloc(fiber_max, sizeof(*slots));
		if (fiber_stacks == MAP_FAILED || !slots) {
			emu_report("cannot map %zu bytes of fiber stacks", fiber_stack_bytes * fiber_max);
			abort();
		}
	}
	b.nthreads = (int)nt;
	b.name = name;
	b.body = &body;
	b.warps = std::vector<warp_state>((nt + 31) / 32);
	b.async.resize(nt);
	for (size_t w = 0; w < b.warps.size(); w++)
		b.warps[w].lanes = (int)(nt - w * 32 < 32 ? nt - w * 32 : 32);
	for (unsigned t = 0; t < nt; t++) {
		fs[t].tid = (int)t;
		set_thread(t, cfg.block);
		fs[t].idx = threadIdx;
	}
	cur_block = &b;
	blockDim = cfg.block;
	gridDim = cfg.grid;
	order_of(blocks, nb);
	for (unsigned i : blocks)
		run_block(&b, cfg, i, fs, turn, free_slots);
	cur_block = saved;
	cur_tid = saved_tid;
}

/* The most blocks one launch may have: EMU_MAX_BLOCKS, default 200000 (a
 * bound on a test's time; the roofline bench runs a whole GPT-2 step). */
static unsigned long long max_blocks(void)
{
	static unsigned long long n;

	if (!n) {
		const char *v = getenv("EMU_MAX_BLOCKS");
		char *end;
		unsigned long long k = v && *v ? strtoull(v, &end, 10) : 200000;

		if (v && *v && (*end || k == 0)) {
			fprintf(stderr, "emu: EMU_MAX_BLOCKS=%s: expected a positive count; using "
				"200000\n", v);
			k = 200000;
		}
		n = k;
	}
	return n;
}

/* Checks the configuration now (an invalid one is the launch's error, as
 * on a GPU) and queues the kernel on its stream; under EMU_COUNTS its
 * execution is counted (emu_count.cpp) against the memory of the device
 * current at the launch. */
void emu_run(const emu_cfg_t &cfg, const char *name, std::function<void()> body)
{
	const dim3 g = cfg.grid, bl = cfg.block;
	unsigned long long nt = (unsigned long long)bl.x * bl.y * bl.z;
	cudaError_t err;
	int dev;

	emu_launches++;
	if (emu_tracing())
		fprintf(stderr, "emu: launch %s grid (%u,%u,%u) block (%u,%u,%u)\n", name, g.x, g.y,
			g.z, bl.x, bl.y, bl.z);
	if (nt == 0 || nt > 1024 || bl.x > 1024 || bl.y > 1024 || bl.z > 64 || g.x == 0 || g.y == 0 ||
	    g.z == 0 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535 || cfg.shmem > 48 * 1024) {
		emu_report("kernel %s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u) "
			   "shared memory %zu bytes", name, g.x, g.y, g.z, bl.x, bl.y, bl.z, cfg.shmem);
		emu_set_error(cudaErrorInvalidConfiguration);
		return;
	}
	if ((unsigned long long)g.x * g.y * g.z > max_blocks()) {
		emu_report("kernel %s: %llu blocks is more than this emulator runs (EMU_MAX_BLOCKS=%llu; "
			   "raise it for a larger run)", name, (unsigned long long)g.x * g.y * g.z,
			   max_blocks());
		emu_set_error(cudaErrorInvalidConfiguration);
		return;
	}
	dev = emu_current_device();
	err = emu_enqueue(cfg.stream, name, [cfg, name, body, dev] {
		emu_count_kernel_begin(dev);
		emu_kernel_exec(cfg, name, body);
		emu_count_kernel_end(name);
	});
	if (err != cudaSuccess)
		emu_set_error(err);
}

/* The emulated device runs every kernel as built for sm_90 (H100/H200):
 * what the code of a kernel was compiled for, as the kernel libraries ask
 * before choosing an architecture-dependent path (cuda_flash_tc.cu). */
extern "C" cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
	if (!attr || !func)
		return emu_set_error(cudaErrorInvalidValue);
	memset(attr, 0, sizeof(*attr));
	attr->maxThreadsPerBlock = 1024;
	attr->ptxVersion = 90;
	attr->binaryVersion = 90;
	return cudaSuccess;
}
