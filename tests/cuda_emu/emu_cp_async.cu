/* emu_cp_async - cp.async (kernels/cuda/cuda_mma.cuh) under the emulator,
 * whose copies are deferred until a wait retires their group:
 *   (no argument) a block of 64 threads double-buffers 16 tiles of 256
 *     floats through shared memory (issue tile t+1, commit, wait<1>,
 *     __syncthreads, then each thread reads elements another thread
 *     copied) and equals the host's weighted sum exactly (small integers);
 *     one thread's groups retire as PTX says and no earlier (wait<1>
 *     leaves the newest committed group pending, wait<0> leaves the open
 *     group, wait_all performs it); under EMU_COUNTS the pipeline's
 *     kernel, which reads global memory only by cp.async, counts the 16 KiB
 *     it copies as read (within a page at either end);
 *   missing-wait: the same pipeline without its wait<1> reads every tile
 *     before its copy lands: the program checks that the result differs
 *     from the host's and that every value is the one the stale buffers
 *     give (the sentinel written before the copies), and exits 1 saying so;
 *   missing-sync: the pipeline without the __syncthreads after its wait
 *     reads elements other threads copied before they waited: the result
 *     differs from the host's and the program exits 1 saying so;
 *   misaligned: a copy from a global address 8 bytes past a 16-byte
 *     boundary fails, naming the call.
 * Exits 0 when every check holds (the failing modes are run by
 * emu_expect_fail). */
#include "cuda_mma.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 64
#define TILE (THREADS * 4) /* floats: 16 bytes per thread */
#define TILES 16
#define SENTINEL (-1000.0f)

enum { MODE_WAIT, MODE_NO_WAIT, MODE_NO_SYNC, MODE_MISALIGNED };

/* out[e] = sum over tiles t of (t + 1) in[t][TILE - 1 - e]: each thread
 * reads the elements that the thread at the mirrored position copied. */
__global__ void k_pipeline(const float *in, float *out, int mode)
{
	__shared__ __align__(16) float buf[2][TILE];
	int tid = threadIdx.x;
	float acc[4] = { 0, 0, 0, 0 };

	for (int i = 0; i < 4; i++)
		buf[0][4 * tid + i] = buf[1][4 * tid + i] = SENTINEL;
	__syncthreads();
	cp_async_16(&buf[0][4 * tid], in + 4 * tid + (mode == MODE_MISALIGNED ? 2 : 0));
	cp_async_commit();
	for (int t = 0; t < TILES; t++) {
		if (t + 1 < TILES)
			cp_async_16(&buf[(t + 1) & 1][4 * tid], in + (t + 1) * TILE + 4 * tid);
		cp_async_commit(); /* an empty group at the end keeps wait<1> uniform */
		if (mode != MODE_NO_WAIT)
			cp_async_wait<1>(); /* tile t landed, t + 1 may be in flight */
		if (mode != MODE_NO_SYNC)
			__syncthreads(); /* and so has every other thread's part */
		for (int i = 0; i < 4; i++)
			acc[i] += (float)(t + 1) * buf[t & 1][TILE - 1 - (4 * tid + i)];
		__syncthreads(); /* before tile t + 2 overwrites this buffer */
	}
	cp_async_wait_all();
	for (int i = 0; i < 4; i++)
		out[4 * tid + i] = acc[i];
}

/* One thread's groups: flags[k] = 1 when check k holds. */
__global__ void k_groups(const float *in, float *flags)
{
	__shared__ __align__(16) float s[3][4];

	for (int g = 0; g < 3; g++)
		for (int i = 0; i < 4; i++)
			s[g][i] = SENTINEL;
	cp_async_16(s[0], in);
	cp_async_commit();
	cp_async_16(s[1], in + 4);
	cp_async_commit();
	cp_async_16(s[2], in + 8); /* in the open group */
	cp_async_wait<1>();
	flags[0] = s[0][0] == in[0] && s[0][3] == in[3];
	flags[1] = s[1][0] == SENTINEL; /* the newest committed group is pending */
	cp_async_wait<0>();
	flags[2] = s[1][0] == in[4] && s[1][3] == in[7];
	flags[3] = s[2][0] == SENTINEL; /* the open group is not waited for */
	cp_async_wait_all();
	flags[4] = s[2][0] == in[8] && s[2][3] == in[11];
}

static int failures;

static void expect(int ok, const char *what)
{
	if (!ok) {
		printf("FAIL: %s\n", what);
		failures++;
	}
}

/* The pipeline's result on the host; stale: what every read of a buffer
 * before its copy gives. */
static void host_pipeline(const float *in, float *want, float *stale)
{
	for (int e = 0; e < TILE; e++) {
		want[e] = stale[e] = 0.0f;
		for (int t = 0; t < TILES; t++) {
			want[e] += (float)(t + 1) * in[t * TILE + TILE - 1 - e];
			stale[e] += (float)(t + 1) * SENTINEL;
		}
	}
}

/* The first kernel record of the counts file: bytes read and written. */
static int read_kernel(const char *path, double *rd, double *wr)
{
	FILE *f = fopen(path, "r");
	char line[512], name[64], cls[16], kind;
	double flops;
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "%c\t%63[^\t]\t%lf\t%lf\t%lf\t%15s", &kind, name, rd, wr, &flops,
			       cls) == 6 && kind == 'K';
	fclose(f);
	return found;
}

int main(int argc, char **argv)
{
	const char *arg = argc > 1 ? argv[1] : "";
	int mode = !*arg ? MODE_WAIT : !strcmp(arg, "missing-wait") ? MODE_NO_WAIT :
		   !strcmp(arg, "missing-sync") ? MODE_NO_SYNC :
		   !strcmp(arg, "misaligned") ? MODE_MISALIGNED : -1;
	char path[] = "/tmp/emu_cp_async_XXXXXX";
	static float hin[TILES * TILE], hout[TILE], want[TILE], stale[TILE], hflags[5];
	float *in, *out, *flags;
	double rd = 0, wr = 0, page = (double)sysconf(_SC_PAGESIZE), bytes = sizeof(hin);
	int fd, differ = 0, all_stale = 1;

	if (mode < 0) {
		printf("usage: emu_cp_async [missing-wait|missing-sync|misaligned]\n");
		return 2;
	}
	fd = mkstemp(path);
	if (fd < 0) {
		perror("emu_cp_async: mkstemp");
		return 1;
	}
	close(fd);
	if (mode == MODE_WAIT)
		setenv("EMU_COUNTS", path, 1);
	for (int i = 0; i < TILES * TILE; i++)
		hin[i] = (float)(i * 7 % 23 - 11);
	if (cudaMalloc((void **)&in, sizeof(hin)) || cudaMalloc((void **)&out, sizeof(hout)) ||
	    cudaMalloc((void **)&flags, sizeof(hflags))) {
		printf("FAIL: setting up\n");
		return 1;
	}
	cudaMemcpy(in, hin, sizeof(hin), cudaMemcpyHostToDevice);
	k_pipeline<<<1, THREADS>>>(in, out, mode);
	cudaMemcpy(hout, out, sizeof(hout), cudaMemcpyDeviceToHost);
	host_pipeline(hin, want, stale);
	for (int e = 0; e < TILE; e++) {
		differ |= hout[e] != want[e];
		all_stale &= hout[e] == stale[e];
	}
	if (mode == MODE_NO_WAIT) {
		unlink(path);
		if (differ && all_stale) {
			printf("emu_cp_async missing-wait: every tile was read before its cp.async "
			       "landed (stale shared memory): the result differs from the host's\n");
			return 1;
		}
		printf("emu_cp_async missing-wait: the result %s the host's and %s the stale "
		       "buffers' values; the emulator did not defer the copies\n",
		       differ ? "differs from" : "equals", all_stale ? "equals" : "differs from");
		return 0;
	}
	if (mode == MODE_NO_SYNC) {
		unlink(path);
		printf("emu_cp_async missing-sync: the result %s the host's%s\n",
		       differ ? "differs from" : "equals",
		       differ ? ": threads read other threads' cp.async data before the "
				"__syncthreads after the wait" : "; the emulator did not defer the copies");
		return differ ? 1 : 0;
	}
	if (mode == MODE_MISALIGNED) { /* the emulator ended the process before this */
		unlink(path);
		printf("emu_cp_async misaligned: the kernel ran to its end\n");
		return 0;
	}
	expect(!differ, "the double-buffered pipeline equals the host's sum");
	expect(read_kernel(path, &rd, &wr), "a kernel record in the counts file");
	unlink(path);
	expect(rd >= bytes && rd <= bytes + 2 * page,
	       "the pipeline's cp.async copies count as its reads (within 2 pages)");
	k_groups<<<1, 1>>>(in, flags);
	cudaMemcpy(hflags, flags, sizeof(hflags), cudaMemcpyDeviceToHost);
	expect(hflags[0] == 1, "wait<1> performs the older committed group");
	expect(hflags[1] == 1, "wait<1> leaves the newest committed group pending");
	expect(hflags[2] == 1, "wait<0> performs every committed group");
	expect(hflags[3] == 1, "wait<0> leaves the open (uncommitted) group pending");
	expect(hflags[4] == 1, "wait_all performs the open group");
	if (!failures)
		printf("emu_cp_async: the pipeline equals the host's, groups retire as PTX says, "
		       "%g bytes counted read for %g copied\n", rd, bytes);
	return failures ? 1 : 0;
}
