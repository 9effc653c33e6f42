/* emu_host_waits - EMU_SUMMARY's host counts (emu_mem.cpp) are right on
 * known calls: each call the program makes that waits for the device on
 * the host, and each allocation, counts once in its kind, and nothing else
 * counts:
 *   - a kernel launch, cudaMemcpyAsync to the device or into pinned memory,
 *     cudaMemsetAsync, event records and waits, a host function: nothing;
 *   - cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize,
 *     cudaStreamQuery, cudaEventQuery: one each in their kind;
 *   - cudaMemcpy to the host and cudaMemcpyAsync into pageable memory:
 *     memcpy_d2h; cudaMemcpy to the device: memcpy_other; cudaMemset: one;
 *   - cudaMalloc, cudaFree (its own synchronize not counted as a wait),
 *     cudaMallocHost, cudaHostAlloc, cudaFreeHost: one each;
 *   - inside a host function, cudaMemcpy runs at once and counts nothing.
 * Exits 0 when every count is right; prints each wrong one. */
#include <stdio.h>
#include <string.h>

/* The kinds of emu_impl.h's enum emu_host_kind, in order. */
enum { SSYNC, DSYNC, ESYNC, SQUERY, EQUERY, D2H, OTHER, MEMSET, MALLOC, FREE, MHOST, FHOST, KINDS };
static const char *const names[KINDS] = { "cudaStreamSynchronize", "cudaDeviceSynchronize",
					   "cudaEventSynchronize", "cudaStreamQuery",
					   "cudaEventQuery", "memcpy_d2h", "memcpy_other",
					   "cudaMemset", "cudaMalloc", "cudaFree",
					   "cudaMallocHost", "cudaFreeHost" };

extern "C" int emu_host_counts(long *out, int n);

static long base[KINDS];
static int failures;

__global__ void k_add(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] += 1.0f;
}

/* The counts since the last check equal want[] (kinds not named: 0). */
static void expect(const char *what, const int *kinds, int nk)
{
	long now[KINDS], want[KINDS] = { 0 };

	if (emu_host_counts(now, KINDS) != KINDS) {
		printf("emu_host_waits: %s: the emulator counts another set of kinds\n", what);
		failures++;
		return;
	}
	for (int i = 0; i < nk; i++)
		want[kinds[i]]++;
	for (int k = 0; k < KINDS; k++) {
		if (now[k] - base[k] != want[k]) {
			printf("emu_host_waits: %s: %s counted %ld, expected %ld\n", what, names[k],
			       now[k] - base[k], want[k]);
			failures++;
		}
		base[k] = now[k];
	}
}

static float *host_fn_dev;
static float host_fn_out;

static void CUDART_CB in_host_fn(void *arg)
{
	(void)arg;
	cudaMemcpy(&host_fn_out, host_fn_dev, sizeof(float), cudaMemcpyDeviceToHost);
}

int main(void)
{
	static float page[1024];
	float *d = NULL, *pin = NULL, *pin2 = NULL;
	cudaStream_t s;
	cudaEvent_t e;

	emu_host_counts(base, KINDS);
	cudaMalloc((void **)&d, sizeof(page));
	cudaMallocHost((void **)&pin, sizeof(page));
	cudaHostAlloc((void **)&pin2, sizeof(page), cudaHostAllocDefault);
	{
		const int k[] = { MALLOC, MHOST, MHOST };
		expect("allocations", k, 3);
	}
	cudaStreamCreate(&s);
	cudaEventCreate(&e);
	cudaMemcpyAsync(d, page, sizeof(page), cudaMemcpyHostToDevice, s);
	k_add<<<4, 256, 0, s>>>(d, 1024);
	cudaMemsetAsync(d, 0, 16, s);
	cudaMemcpyAsync(pin, d, sizeof(page), cudaMemcpyDeviceToHost, s);
	cudaEventRecord(e, s);
	cudaStreamWaitEvent(0, e, 0);
	host_fn_dev = d;
	cudaLaunchHostFunc(s, in_host_fn, NULL);
	expect("queued work", NULL, 0);
	cudaStreamSynchronize(s);
	cudaStreamQuery(s);
	cudaEventQuery(e);
	cudaEventSynchronize(e);
	cudaDeviceSynchronize();
	{
		const int k[] = { SSYNC, SQUERY, EQUERY, ESYNC, DSYNC };
		expect("synchronizes and queries (a host function's copy not counted)", k, 5);
	}
	cudaMemcpy(page, d, sizeof(page), cudaMemcpyDeviceToHost);
	cudaMemcpyAsync(page, d, sizeof(page), cudaMemcpyDeviceToHost, s);
	cudaMemcpy(d, page, sizeof(page), cudaMemcpyHostToDevice);
	cudaMemset(d, 0, sizeof(page));
	{
		const int k[] = { D2H, D2H, OTHER, MEMSET };
		expect("synchronous copies and memset", k, 4);
	}
	cudaFree(d);
	cudaFreeHost(pin);
	cudaFreeHost(pin2);
	{
		const int k[] = { FREE, FHOST, FHOST };
		expect("frees (their synchronizes not counted as waits)", k, 3);
	}
	cudaEventDestroy(e);
	cudaStreamDestroy(s);
	if (failures)
		return 1;
	printf("emu_host_waits: every count right\n");
	return 0;
}
