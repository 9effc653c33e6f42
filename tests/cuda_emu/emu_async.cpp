/* emu_async.cpp - Ampere's asynchronous copies from global to shared
 * memory (cp.async, kernels/cuda/cuda_mma.cuh), deferred as far as the
 * PTX ISA allows: a thread's copies are queued with the commit group they
 * belong to and performed only when a cp.async.wait_group (or wait_all)
 * retires their group, or when the thread ends. So shared memory read
 * before the wait that orders it holds what was there before the copy,
 * and a kernel that forgets a wait, or waits for too few groups, computes
 * with stale data under the emulator as it may on a GPU.
 *
 * The copy itself is a memcpy by the thread that waits, inside the
 * kernel's execution: under EMU_COUNTS its source pages fault and count
 * as the kernel's reads (emu_count.cpp) as any load does. What the
 * instruction requires is checked when a copy is issued, and a violation
 * is reported and ends the process: both addresses 16-byte aligned (the
 * 16-byte form), the source inside a cudaMalloc allocation, the
 * destination outside one (shared memory). */
#include "emu_impl.h"

#include <stdlib.h>
#include <string.h>

void emu_async_complete(emu_async_thread *t, unsigned before)
{
	size_t kept = 0;

	for (size_t i = 0; i < t->copies.size(); i++) {
		const emu_async_copy &c = t->copies[i];

		if (c.group < before)
			memcpy(c.dst, c.src, c.bytes);
		else
			t->copies[kept++] = c;
	}
	t->copies.resize(kept);
}

/* The running thread's state; reports and aborts outside a kernel. */
static emu_async_thread *thread_state(const char *call, const char **kernel)
{
	emu_async_thread *t = emu_cur_async(kernel);

	if (!t) {
		emu_report("%s called outside a kernel: it is a device instruction", call);
		abort();
	}
	return t;
}

void emu_cp_async(const char *call, void *smem, const void *gmem, unsigned bytes)
{
	const char *kernel;
	emu_async_thread *t = thread_state(call, &kernel);

	if ((uintptr_t)smem % 16 || (uintptr_t)gmem % 16) {
		emu_report("kernel %s: %s: the %s address %p is not 16-byte aligned; a 16-byte "
			   "cp.async needs both addresses on 16-byte boundaries (align the shared "
			   "array, __align__(16), and copy whole 16-byte chunks of 16-byte aligned "
			   "rows)", kernel, call, (uintptr_t)smem % 16 ? "shared" : "global",
			   (uintptr_t)smem % 16 ? smem : gmem);
		abort();
	}
	if (!emu_dev_range_ok(gmem, bytes)) {
		emu_report("kernel %s: %s: the source [%p, +%u) is not inside one cudaMalloc "
			   "allocation; cp.async copies from global (device) memory", kernel, call,
			   gmem, bytes);
		abort();
	}
	if (emu_is_dev(smem)) {
		emu_report("kernel %s: %s: the destination %p is global (device) memory; "
			   "cp.async copies into shared memory (a __shared__ array)", kernel, call,
			   smem);
		abort();
	}
	t->copies.push_back(emu_async_copy{ smem, gmem, bytes, t->committed });
}

void emu_cp_async_commit(void)
{
	const char *kernel;

	thread_state("cp.async.commit_group", &kernel)->committed++;
}

void emu_cp_async_wait(int n)
{
	const char *kernel;
	emu_async_thread *t;

	if (n < 0) { /* wait_all: commit, then wait for every group */
		t = thread_state("cp.async.wait_all", &kernel);
		t->committed++;
		emu_async_complete(t, t->committed);
		return;
	}
	t = thread_state("cp.async.wait_group", &kernel);
	if (t->committed > (unsigned)n)
		emu_async_complete(t, t->committed - (unsigned)n);
}
