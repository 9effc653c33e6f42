/* emu_count.cpp - EMU_COUNTS=<file>: what each piece of emulated device
 * work moves and computes, one line per kernel launch, GEMM, copy and
 * memset, for the roofline estimate (bench/roofline).
 *
 * Kernels: page-granular touch tracking. While a counted kernel runs, its
 * device's allocations start PROT_NONE; the first access to a page faults
 * and the handler (emu_count_fault, called by emu_mem.cpp's SIGSEGV
 * handler) opens it for reading (a load: the page counts as read) or for
 * writing (a store: counts as written); a store to a page opened for
 * reading faults once more and counts it as written too. So a launch's
 * count is its unique footprint in whole pages: what it must move between
 * DRAM and the chip at least, when every page it touches is touched once
 * (a copy of N floats reads and writes 4N bytes, rounded up to pages at
 * each end). A page touched partly counts whole, and a re-read of data
 * that no longer fits in L2 counts once: a lower bound of the traffic at
 * the sizes of a real step, an upper one for tensors smaller than a page.
 * Instrumenting every load and store instead would need the kernels
 * rewritten; the page trap needs nothing of them. Loads and stores are
 * told apart by the x86-64 page-fault error code; elsewhere the first
 * touch opens the page for both and counts it both ways.
 *
 * GEMMs (the cuBLAS stand-in), copies and memsets are counted from their
 * arguments: a GEMM reads A and B (and C when beta is not 0), writes C,
 * and does 2 m n k FLOPs per batch, classed by how a GPU runs it (16-bit
 * inputs on tensor cores, F32 under CUBLAS_TF32_TENSOR_OP_MATH as TF32,
 * other F32 on the CUDA cores). A kernel's own arithmetic is not seen,
 * except its warp matrix products: each warp's wmma::mma_sync adds
 * 2 x 16 x 16 x 16 FLOPs and each warp's mma_16816 (cuda_mma.cuh)
 * 2 x 16 x 8 x 16, of class tc16 (emu_count_add_flops, from
 * emu_launch.cpp), so the kernel's line carries them and their class.
 * A cp.async copy (emu_async.cpp) is a memcpy inside the kernel: its
 * source pages fault and count as reads like any load's.
 *
 * The file: a line per operation in execution order,
 *   <kind> TAB <name> TAB <bytes read> TAB <bytes written> TAB <flops> TAB <class>
 * kind K (kernel), G (GEMM), C (copy or memset); class "-" when no FLOPs
 * are counted, "h2d"/"d2h" for copies over the host link; and a line
 *   M TAB <label>
 * each time the program calls emu_count_mark (looked up with dlsym by a
 * driver that wants to bracket one training step). Counting assumes one
 * host thread issues the counted work (the handler reads the table of
 * allocations without a lock). */
#include "emu_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace {

struct counted_block {
	uintptr_t base;
	size_t pages;
	std::vector<unsigned char> state; /* per page: 0 untouched, 1 read, 2 written, 3 both */
};

enum { PAGE_READ = 1, PAGE_WRITTEN = 2 };

FILE *out;
int out_state = -1; /* -1 not yet looked at, 0 off, 1 on */
std::mutex out_mu;
size_t page_bytes;

/* the launch being counted: its device's blocks, sorted by base */
std::vector<counted_block> blocks;
volatile int counting;
size_t pages_read, pages_written;
double kernel_flops;          /* emu_count_add_flops during the launch */
const char *kernel_cls = "-"; /* their class */

} /* namespace */

int emu_counting(void)
{
	if (out_state < 0) {
		std::lock_guard<std::mutex> g(out_mu);
		const char *path = getenv("EMU_COUNTS");

		page_bytes = (size_t)sysconf(_SC_PAGESIZE);
		out_state = 0;
		if (path && *path) {
			out = fopen(path, "w");
			if (!out) {
				fprintf(stderr, "emu: EMU_COUNTS=%s: cannot open it for writing; "
					"nothing is counted\n", path);
			} else {
				setvbuf(out, NULL, _IOLBF, 0);
				out_state = 1;
			}
		}
	}
	return out_state;
}

void emu_count_record(char kind, const char *name, double rd, double wr, double flops,
		      const char *cls)
{
	if (!emu_counting())
		return;
	std::lock_guard<std::mutex> g(out_mu);
	fprintf(out, "%c\t%s\t%.0f\t%.0f\t%.0f\t%s\n", kind, name, rd, wr, flops, cls);
}

void emu_count_kernel_begin(int dev)
{
	size_t k = 0;

	if (!emu_counting())
		return;
	blocks.clear();
	emu_dev_blocks(dev, [&](uintptr_t base, size_t bytes) {
		counted_block b;

		b.base = base;
		b.pages = (bytes + page_bytes - 1) / page_bytes;
		blocks.push_back(std::move(b));
	});
	std::sort(blocks.begin(), blocks.end(),
		  [](const counted_block &a, const counted_block &b) { return a.base < b.base; });
	for (k = 0; k < blocks.size(); k++) {
		blocks[k].state.assign(blocks[k].pages, 0);
		mprotect((void *)blocks[k].base, blocks[k].pages * page_bytes, PROT_NONE);
	}
	pages_read = pages_written = 0;
	kernel_flops = 0.0;
	kernel_cls = "-";
	counting = 1;
}

void emu_count_kernel_end(const char *name)
{
	if (!counting)
		return;
	counting = 0;
	for (auto &b : blocks)
		mprotect((void *)b.base, b.pages * page_bytes, PROT_READ | PROT_WRITE);
	emu_count_record('K', name, (double)(pages_read * page_bytes),
			 (double)(pages_written * page_bytes), kernel_flops, kernel_cls);
	blocks.clear();
}

void emu_count_add_flops(double flops, const char *cls)
{
	if (!counting)
		return;
	if (kernel_flops > 0.0 && strcmp(kernel_cls, cls))
		emu_report("EMU_COUNTS: a kernel counted FLOPs of classes %s and %s; one line "
			   "holds one class", kernel_cls, cls);
	kernel_flops += flops;
	kernel_cls = cls;
}

/* From the SIGSEGV handler: no allocation, no lock. */
int emu_count_fault(const void *addr, int is_write)
{
	uintptr_t a = (uintptr_t)addr;
	size_t lo = 0, hi;

	if (!counting)
		return 0;
	hi = blocks.size();
	while (lo < hi) { /* the first block whose base is above a */
		size_t mid = (lo + hi) / 2;

		if (blocks[mid].base <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	counted_block &b = blocks[lo - 1];
	size_t p = (a - b.base) / page_bytes;
	if (p >= b.pages)
		return 0;
	unsigned char &s = b.state[p];
	void *page = (void *)(b.base + p * page_bytes);
	if (is_write < 0) { /* unknown: open for both, count both */
		if (!(s & PAGE_READ))
			pages_read++;
		if (!(s & PAGE_WRITTEN))
			pages_written++;
		s = PAGE_READ | PAGE_WRITTEN;
		return mprotect(page, page_bytes, PROT_READ | PROT_WRITE) == 0;
	}
	if (!is_write && !s) {
		s = PAGE_READ;
		pages_read++;
		return mprotect(page, page_bytes, PROT_READ) == 0;
	}
	if (s & PAGE_WRITTEN) /* open already: not a fault of ours */
		return 0;
	s |= PAGE_WRITTEN;
	pages_written++;
	return mprotect(page, page_bytes, PROT_READ | PROT_WRITE) == 0;
}

extern "C" __attribute__((visibility("default"))) void emu_count_mark(const char *label)
{
	if (!emu_counting())
		return;
	/* what the program queued before the mark belongs before it (the
	 * mark's own wait is not the program's: not counted) */
	emu_internal_begin();
	cudaDeviceSynchronize();
	emu_internal_end();
	std::lock_guard<std::mutex> g(out_mu);
	fprintf(out, "M\t%s\n", label ? label : "");
}
