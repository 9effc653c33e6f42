/* emu_mem.cpp - device and pinned memory of the emulated CUDA runtime, its
 * host-access trap, device queries and the error state.
 *
 * Device allocations are mmap'd pages that stay PROT_NONE except while
 * emulated device work (a kernel, a copy, a memset, a GEMM, a host
 * function) runs, so host code that dereferences a device pointer takes
 * SIGSEGV; the handler installed here names the allocation before the
 * process dies the ordinary way. With several devices (EMU_DEVICES) each
 * allocation belongs to the device current at cudaMalloc, and work opens
 * only its own device's memory: a pointer of another device faults the
 * same way, and the handler says so. */
#include "emu_impl.h"

#include <signal.h>
#include <ucontext.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>

static thread_local cudaError_t last_err = cudaSuccess;

cudaError_t emu_set_error(cudaError_t e)
{
	if (e != cudaSuccess)
		last_err = e;
	return e;
}

static int env_on(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0") != 0;
}

int emu_tracing(void)
{
	static int trace = -1;

	if (trace < 0)
		trace = env_on("EMU_TRACE");
	return trace;
}

void emu_report(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "EMU DEFECT: %s\n", msg);
	fflush(stderr);
	if (env_on("EMU_ABORT_ON_DEFECT"))
		abort();
}

/* ---- allocations ---- */

static std::recursive_mutex mem_mu;
static std::map<uintptr_t, size_t> dev_blocks; /* base -> bytes asked for */
static std::map<uintptr_t, int> dev_owner;     /* base -> the device it belongs to */
static std::map<uintptr_t, size_t> pin_blocks;
static int dev_open[EMU_MAX_DEVICES];
static thread_local int cur_dev;

int emu_device_count(void)
{
	static int n;

	if (!n) {
		const char *v = getenv("EMU_DEVICES");
		char *end;
		long k = v && *v ? strtol(v, &end, 10) : 1;

		if (v && *v && (*end || k < 1 || k > EMU_MAX_DEVICES)) {
			fprintf(stderr, "emu: EMU_DEVICES=%s: expected a device count from 1 to %d; "
				"using 1\n", v, EMU_MAX_DEVICES);
			k = 1;
		}
		n = (int)k;
	}
	return n;
}

int emu_current_device(void)
{
	return cur_dev;
}

static int protecting(void)
{
	static int p = -1;

	if (p < 0)
		p = !env_on("EMU_NO_PROTECT");
	return p;
}

static size_t round_page(size_t n)
{
	static size_t page;

	if (!page)
		page = (size_t)sysconf(_SC_PAGESIZE);
	return (n + page - 1) / page * page;
}

static void dev_protect_all(int dev, int prot)
{
	if (!protecting())
		return;
	/* the two maps hold the same keys: walk them together */
	auto o = dev_owner.begin();
	for (auto &b : dev_blocks) {
		if (o->second == dev)
			mprotect((void *)b.first, round_page(b.second), prot);
		++o;
	}
}

static int dev_index_ok(int dev)
{
	return dev >= 0 && dev < EMU_MAX_DEVICES;
}

void emu_dev_enter(int dev)
{
	std::lock_guard<std::recursive_mutex> g(mem_mu);

	if (dev_index_ok(dev) && dev_open[dev]++ == 0)
		dev_protect_all(dev, PROT_READ | PROT_WRITE);
}

void emu_dev_exit(int dev)
{
	std::lock_guard<std::recursive_mutex> g(mem_mu);

	if (dev_index_ok(dev) && --dev_open[dev] == 0)
		dev_protect_all(dev, PROT_NONE);
}

void emu_dev_blocks(int dev, const std::function<void(uintptr_t, size_t)> &fn)
{
	std::lock_guard<std::recursive_mutex> g(mem_mu);
	auto o = dev_owner.begin();

	for (auto &b : dev_blocks) {
		if (o->second == dev)
			fn(b.first, b.second);
		++o;
	}
}

/* The block of `blocks` holding p (base in *base, size in *bytes), or 0. */
static int block_of(const std::map<uintptr_t, size_t> &blocks, const void *p, uintptr_t *base,
		    size_t *bytes)
{
	uintptr_t a = (uintptr_t)p;
	auto it = blocks.upper_bound(a);

	if (it == blocks.begin())
		return 0;
	--it;
	if (a < it->first || a >= it->first + (it->second ? it->second : 1))
		return 0;
	if (base)
		*base = it->first;
	if (bytes)
		*bytes = it->second;
	return 1;
}

int emu_is_dev(const void *p)
{
	std::lock_guard<std::recursive_mutex> g(mem_mu);

	return block_of(dev_blocks, p, NULL, NULL);
}

int emu_is_pinned(const void *p)
{
	std::lock_guard<std::recursive_mutex> g(mem_mu);

	return block_of(pin_blocks, p, NULL, NULL);
}

int emu_device_of(const void *p)
{
	std::lock_guard<std::recursive_mutex> g(mem_mu);
	uintptr_t base;

	return block_of(dev_blocks, p, &base, NULL) ? dev_owner.find(base)->second : -1;
}

int emu_dev_range_ok(const void *p, size_t n)
{
	std::lock_guard<std::recursive_mutex> g(mem_mu);
	uintptr_t base;
	size_t bytes;

	return block_of(dev_blocks, p, &base, &bytes) && (uintptr_t)p + n <= base + bytes;
}

/* ---- the host-access trap ---- */

static struct sigaction old_segv;

/* A fault of a launch being counted (EMU_COUNTS, emu_count.cpp) opens its
 * page and returns, and the access is retried. Otherwise it is a fault on
 * a device page outside emulated work: say which allocation,
 * then put the previous handler back and return, so the access faults
 * again and the process ends as it would have without the emulator (a
 * signal, a sanitizer report). The map is read without its lock: the
 * process is about to die, and a torn read only loses the detail. */
static void segv_handler(int sig, siginfo_t *si, void *uctx)
{
	uintptr_t base;
	size_t bytes;
	char msg[512];
	int n;

	(void)sig;
#if defined(__x86_64__)
	/* bit 1 of the page-fault error code: the access was a store */
	long err = (long)((ucontext_t *)uctx)->uc_mcontext.gregs[REG_ERR];

	if (emu_count_fault(si->si_addr, (int)(err >> 1 & 1)))
		return;
#else
	(void)uctx;
	if (emu_count_fault(si->si_addr, -1))
		return;
#endif
	if (block_of(dev_blocks, si->si_addr, &base, &bytes)) {
		auto o = dev_owner.find(base); /* no allocation in a signal handler */
		int owner = o != dev_owner.end() ? o->second : 0, running = -1;

		for (int d = 0; d < EMU_MAX_DEVICES; d++)
			if (dev_open[d] && d != owner)
				running = d;
		if (running >= 0)
			n = snprintf(msg, sizeof(msg), "EMU DEFECT: device work of cuda:%d accessed "
				     "memory of cuda:%d at %p (byte %zu of a %zu-byte cudaMalloc "
				     "allocation at %p): a kernel, copy or GEMM uses a pointer of "
				     "another device (the emulator has no peer access; weft runs one "
				     "GPU per process)\n", running, owner, si->si_addr,
				     (size_t)((uintptr_t)si->si_addr - base), bytes, (void *)base);
		else
			n = snprintf(msg, sizeof(msg), "EMU DEFECT: host code accessed device memory "
				     "at %p (byte %zu of a %zu-byte cudaMalloc allocation at %p on "
				     "cuda:%d) outside emulated device work: copy it with cudaMemcpy "
				     "or touch it in a kernel\n", si->si_addr,
				     (size_t)((uintptr_t)si->si_addr - base), bytes, (void *)base,
				     owner);
		if (n > 0 && write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1) < 0)
			n = 0;
	}
	sigaction(SIGSEGV, &old_segv, NULL);
}

__attribute__((constructor)) static void install_trap(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = segv_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old_segv);
}

extern "C" {

cudaError_t cudaMalloc(void **p, size_t n)
{
	std::lock_guard<std::recursive_mutex> g(mem_mu);
	void *m;

	if (!p)
		return emu_set_error(cudaErrorInvalidValue);
	emu_host_count(EMU_ALLOC_MALLOC);
	*p = NULL;
	if (n == 0)
		return cudaSuccess;
	m = mmap(NULL, round_page(n), dev_open[cur_dev] || !protecting() ? PROT_READ | PROT_WRITE :
		 PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return emu_set_error(cudaErrorMemoryAllocation);
	dev_blocks[(uintptr_t)m] = n;
	dev_owner[(uintptr_t)m] = cur_dev;
	*p = m;
	return cudaSuccess;
}

/* cudaFree waits for the device, as CUDA's does. */
cudaError_t cudaFree(void *p)
{
	if (!p)
		return cudaSuccess;
	emu_host_count(EMU_ALLOC_FREE);
	emu_internal_begin();
	cudaDeviceSynchronize();
	emu_internal_end();
	std::lock_guard<std::recursive_mutex> g(mem_mu);
	auto it = dev_blocks.find((uintptr_t)p);
	if (it == dev_blocks.end()) {
		emu_report("cudaFree(%p): not the start of a device allocation", p);
		return emu_set_error(cudaErrorInvalidValue);
	}
	munmap(p, round_page(it->second));
	dev_blocks.erase(it);
	dev_owner.erase((uintptr_t)p);
	return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t n)
{
	std::lock_guard<std::recursive_mutex> g(mem_mu);

	if (!p)
		return emu_set_error(cudaErrorInvalidValue);
	emu_host_count(EMU_ALLOC_HOST);
	*p = calloc(1, n ? n : 1);
	if (!*p)
		return emu_set_error(cudaErrorMemoryAllocation);
	pin_blocks[(uintptr_t)*p] = n ? n : 1;
	return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags)
{
	(void)flags;
	return cudaMallocHost(p, n);
}

/* cudaFreeHost waits for the device too: queued copies may use the memory. */
cudaError_t cudaFreeHost(void *p)
{
	if (!p)
		return cudaSuccess;
	emu_host_count(EMU_ALLOC_FREE_HOST);
	emu_internal_begin();
	cudaDeviceSynchronize();
	emu_internal_end();
	std::lock_guard<std::recursive_mutex> g(mem_mu);
	if (!pin_blocks.erase((uintptr_t)p)) {
		emu_report("cudaFreeHost(%p): not a pinned allocation", p);
		return emu_set_error(cudaErrorInvalidValue);
	}
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *f, size_t *t)
{
	*f = (size_t)64 << 30;
	*t = (size_t)80 << 30;
	return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
	memset(a, 0, sizeof(*a));
	if (emu_is_dev(p)) {
		a->type = cudaMemoryTypeDevice;
		a->device = emu_device_of(p);
		a->devicePointer = (void *)p;
	} else if (emu_is_pinned(p)) {
		a->type = cudaMemoryTypeHost;
		a->hostPointer = (void *)p;
	} else {
		a->type = cudaMemoryTypeUnregistered;
	}
	return cudaSuccess;
}

/* ---- devices and errors ---- */

cudaError_t cudaGetDeviceCount(int *n)
{
	*n = emu_device_count();
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
	if (d < 0 || d >= emu_device_count())
		return emu_set_error(cudaErrorInvalidDevice);
	cur_dev = d;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
	*d = cur_dev;
	return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_err;

	last_err = cudaSuccess;
	return e;
}

cudaError_t cudaPeekAtLastError(void)
{
	return last_err;
}

const char *cudaGetErrorName(cudaError_t e)
{
	static thread_local char b[64];

	switch (e) {
	case cudaSuccess: return "cudaSuccess";
	case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
	case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
	case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
	case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
	case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
	case cudaErrorNotReady: return "cudaErrorNotReady";
	default: snprintf(b, sizeof(b), "cudaError%d", (int)e); return b;
	}
}

const char *cudaGetErrorString(cudaError_t e)
{
	return cudaGetErrorName(e);
}

} /* extern "C" */

std::atomic<long> emu_launches, emu_gemms;
long emu_deferred;

static std::atomic<long> host_counts[EMU_HOST_KINDS];
static thread_local int internal_depth;

void emu_internal_begin(void)
{
	internal_depth++;
}

void emu_internal_end(void)
{
	internal_depth--;
}

void emu_host_count(enum emu_host_kind kind)
{
	if (!internal_depth && !emu_in_host_fn())
		host_counts[kind]++;
}

/* The counts so far, for a program that checks them itself (looked up
 * with dlsym or linked): out[k] for k < min(n, EMU_HOST_KINDS), in the
 * order of enum emu_host_kind (emu_impl.h); returns EMU_HOST_KINDS. */
extern "C" __attribute__((visibility("default"))) int emu_host_counts(long *out, int n)
{
	for (int k = 0; k < n && k < EMU_HOST_KINDS; k++)
		out[k] = host_counts[k].load();
	return EMU_HOST_KINDS;
}

/* The second summary line: host waits and allocations, each kind by name
 * (the names are the line's grammar: tests parse it). */
static void host_summary(void)
{
	static const char *const names[EMU_HOST_KINDS] = {
		"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
		"cudaStreamQuery", "cudaEventQuery", "memcpy_d2h", "memcpy_other", "cudaMemset",
		"cudaMalloc", "cudaFree", "cudaMallocHost", "cudaFreeHost" };
	long waits = 0, allocs = 0;

	for (int k = 0; k < EMU_HOST_KINDS; k++)
		(k < EMU_WAITS ? waits : allocs) += host_counts[k].load();
	fprintf(stderr, "emu: host waits %ld (", waits);
	for (int k = 0; k < EMU_WAITS; k++)
		fprintf(stderr, "%s%s %ld", k ? ", " : "", names[k], host_counts[k].load());
	fprintf(stderr, "), allocations %ld (", allocs);
	for (int k = EMU_WAITS; k < EMU_HOST_KINDS; k++)
		fprintf(stderr, "%s%s %ld", k > EMU_WAITS ? ", " : "", names[k],
			host_counts[k].load());
	fprintf(stderr, ")\n");
}

__attribute__((destructor)) static void emu_summary(void)
{
	if (!env_on("EMU_SUMMARY"))
		return;
	fprintf(stderr, "emu: %ld kernel launches, %ld cuBLAS GEMMs, %ld stream operations "
		"deferred\n", emu_launches.load(), emu_gemms.load(), emu_deferred);
	host_summary();
}
