/* emu_race - EMU_SEED as a race probe. A kernel that reads a neighbour's
 * shared-memory slot without the __syncthreads between the write and the
 * read (`racy`) gets whatever the fiber order leaves there; the same
 * kernel with the barrier gets the neighbour's value under every order.
 *
 *   emu_race            runs itself under EMU_SEED=1 and EMU_SEED=2 and
 *                       checks that the correct kernel gives the right
 *                       result under both and the racy one does not give
 *                       the same result under both (the probe sees it)
 *   emu_race racy|sync  one run under the current EMU_SEED; prints a
 *                       checksum of the output and whether it was right */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define T 64
#define B 8

__global__ void k_neighbour(const float *x, float *y, int racy)
{
	__shared__ float s[T];
	unsigned t = threadIdx.x, i = blockIdx.x * T + t;

	s[t] = x[i];
	if (!racy)
		__syncthreads();
	y[i] = s[(t + 1) % T];
	__syncthreads(); /* the slots are reused by the next block */
}

/* One launch; prints "<checksum> <right|wrong>". */
static int run_once(int racy)
{
	float hx[T * B], hy[T * B], *x, *y;
	uint64_t sum = 1469598103934665603ull;
	int right = 1;

	for (int i = 0; i < T * B; i++)
		hx[i] = (float)i;
	if (cudaMalloc((void **)&x, sizeof(hx)) != cudaSuccess ||
	    cudaMalloc((void **)&y, sizeof(hy)) != cudaSuccess ||
	    cudaMemcpy(x, hx, sizeof(hx), cudaMemcpyHostToDevice) != cudaSuccess)
		return 1;
	k_neighbour<<<B, T>>>(x, y, racy);
	if (cudaMemcpy(hy, y, sizeof(hy), cudaMemcpyDeviceToHost) != cudaSuccess)
		return 1;
	for (int i = 0; i < T * B; i++) {
		int b = i / T, t = i % T;

		right &= hy[i] == hx[b * T + (t + 1) % T];
		sum = (sum ^ (uint64_t)(int64_t)hy[i]) * 1099511628211ull;
	}
	printf("%016llx %s\n", (unsigned long long)sum, right ? "right" : "wrong");
	cudaFree(x);
	cudaFree(y);
	return 0;
}

/* Runs `self mode` under EMU_SEED=seed; its output line into out. */
static int child(const char *self, const char *mode, int seed, char *out, size_t len)
{
	char cmd[4096];
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "EMU_SEED=%d '%s' %s", seed, self, mode);
	p = popen(cmd, "r");
	if (!p || !fgets(out, (int)len, p)) {
		fprintf(stderr, "emu_race: FAILED: cannot run %s\n", cmd);
		if (p)
			pclose(p);
		return 1;
	}
	st = pclose(p);
	out[strcspn(out, "\n")] = '\0';
	printf("EMU_SEED=%d %s: %s\n", seed, mode, out);
	return st != 0;
}

int main(int argc, char **argv)
{
	char sync1[128], sync2[128], racy1[128], racy2[128];
	int bad = 0;

	if (argc > 1)
		return run_once(!strcmp(argv[1], "racy"));
	if (child(argv[0], "sync", 1, sync1, sizeof(sync1)) ||
	    child(argv[0], "sync", 2, sync2, sizeof(sync2)) ||
	    child(argv[0], "racy", 1, racy1, sizeof(racy1)) ||
	    child(argv[0], "racy", 2, racy2, sizeof(racy2)))
		return 1;
	if (!strstr(sync1, "right") || strcmp(sync1, sync2) != 0) {
		fprintf(stderr, "emu_race: FAILED: the kernel with its barrier must be right under "
			"every seed\n");
		bad = 1;
	}
	if (!strcmp(racy1, racy2)) {
		fprintf(stderr, "emu_race: FAILED: seeds 1 and 2 gave the racy kernel the same "
			"result; the fiber order is not shuffled\n");
		bad = 1;
	}
	if (!bad)
		printf("emu_race: the missing __syncthreads shows: seeds 1 and 2 disagree\n");
	return bad;
}
