/* Optimizer state in flat global coordinates: written by 3 uneven shards,
 * read back by 2 shards and by one process, byte for byte; and a run
 * checkpointed after 3 Adam steps on 3 shards and resumed for 2 more on 2
 * shards ends bit-identical to 5 steps done whole. Truncated files and bad
 * ranges are refused with messages that say what and where.
 */
#include <fcntl.h>
#include <unistd.h>
#include "train/optim_state.h"
#include "optim_test.h"

#define TOTAL 1003
#define NSLOTS 3
#define REGION 4096 /* the region starts after some other checkpoint data */

static void fill(float *x, int64_t n, uint32_t seed)
{
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		x[i] = (float)(seed >> 8) / 8388608.0f - 1.0f;
	}
}

static int tmpfile_fd(char *path, size_t len)
{
	int fd;

	snprintf(path, len, "/tmp/weft-optim-state-XXXXXX");
	fd = mkstemp(path);
	WT_REQUIRE(fd >= 0);
	return fd;
}

static void split(int64_t total, int n, int64_t *bounds)
{
	int64_t per = (total + n - 1) / n;

	for (int i = 0; i <= n; i++)
		bounds[i] = (int64_t)i * per < total ? (int64_t)i * per : total;
}

static void reshard(void)
{
	static float global[NSLOTS][TOTAL], back[NSLOTS][TOTAL];
	char path[64];
	int fd = tmpfile_fd(path, sizeof(path));
	int64_t b3[4], b2[3];

	for (int k = 0; k < NSLOTS; k++)
		fill(global[k], TOTAL, 10u + (uint32_t)k);
	split(TOTAL, 3, b3);
	/* each "rank" writes its slice, in reverse order to prove independence */
	for (int r = 2; r >= 0; r--) {
		const float *views[NSLOTS];

		for (int k = 0; k < NSLOTS; k++)
			views[k] = global[k] + b3[r];
		WT_OK(weft_optim_state_write(fd, path, REGION, TOTAL, NSLOTS, views, b3[r], b3[r + 1]));
	}
	WT_CHECK(lseek(fd, 0, SEEK_END) == REGION + weft_optim_state_bytes(NSLOTS, TOTAL));
	/* read into 2 shards */
	split(TOTAL, 2, b2);
	memset(back, 0, sizeof(back));
	for (int r = 0; r < 2; r++) {
		float *views[NSLOTS];

		for (int k = 0; k < NSLOTS; k++)
			views[k] = back[k] + b2[r];
		WT_OK(weft_optim_state_read(fd, path, REGION, TOTAL, NSLOTS, views, b2[r], b2[r + 1]));
	}
	WT_CHECK(!memcmp(back, global, sizeof(global)));
	/* and whole */
	{
		float *views[NSLOTS] = { back[0], back[1], back[2] };

		memset(back, 0, sizeof(back));
		WT_OK(weft_optim_state_read(fd, path, REGION, TOTAL, NSLOTS, views, 0, TOTAL));
		WT_CHECK(!memcmp(back, global, sizeof(global)));

		/* errors */
		WT_FAILS(weft_optim_state_read(fd, path, REGION, TOTAL, NSLOTS, views, 5, TOTAL + 1),
			 WEFT_ERR_INVALID_ARG, "[5, 1004) is not inside [0, 1003)");
		WT_CHECK(ftruncate(fd, REGION + weft_optim_state_bytes(NSLOTS, TOTAL) - 4) == 0);
		WT_FAILS(weft_optim_state_read(fd, path, REGION, TOTAL, NSLOTS, views, 0, TOTAL),
			 WEFT_ERR_CORRUPT, path, "slot 2 of 3", "1003 elements per slot",
			 "truncated or was written for a model of another size");
	}
	close(fd);
	{
		const float *views[NSLOTS] = { global[0], global[1], global[2] };

		WT_FAILS(weft_optim_state_write(fd, path, REGION, TOTAL, NSLOTS, views, 0, TOTAL),
			 WEFT_ERR_IO, "writing optimizer state slot 0", path);
	}
	unlink(path);
}

/* Adam steps [first, last] on the given shards. */
static void adam_steps(const weft_optim_ops *ops, const void *opt, const weft_optim_segment *segs,
		       size_t nseg, float *params, float *const *slots, const int64_t *bounds,
		       int nshards, int first, int last)
{
	float grads[TOTAL];

	for (int s = first; s <= last; s++) {
		weft_optim_step_info info = {
			.struct_size = sizeof(info), .step = s, .lr = 1e-2, .grad_scale = 1.0,
		};

		fill(grads, TOTAL, 1000u + (uint32_t)s);
		for (int r = 0; r < nshards; r++) {
			int64_t b = bounds[r];
			float *views[2] = { slots[0] + b, slots[1] + b };

			WT_OK(ops->step(opt, segs, nseg, params + b, grads + b, views, b,
					bounds[r + 1], &info));
		}
	}
}

static void resume(void)
{
	const weft_optim_segment segs[3] = {
		{ .name = "w", .offset = 0, .numel = 600, .ndim = 2, .decay = 1 },
		{ .name = "b", .offset = 600, .numel = 3, .ndim = 1, .decay = 0 },
		{ .name = "v", .offset = 603, .numel = 400, .ndim = 2, .decay = 1 },
	};
	static float p_whole[TOTAL], m_whole[TOTAL], v_whole[TOTAL];
	static float p_run[TOTAL], m_run[TOTAL], v_run[TOTAL];
	float *s_whole[2] = { m_whole, v_whole }, *s_run[2] = { m_run, v_run };
	const weft_optim_ops *ops = ot_find("adamw");
	int64_t one[2] = { 0, TOTAL }, b3[4], b2[3];
	char path[64];
	int fd = tmpfile_fd(path, sizeof(path));
	void *opt = NULL;

	WT_OK(ops->create(NULL, &opt));
	fill(p_whole, TOTAL, 5);
	memcpy(p_run, p_whole, sizeof(p_whole));
	adam_steps(ops, opt, segs, 3, p_whole, s_whole, one, 1, 1, 5);

	split(TOTAL, 3, b3);
	adam_steps(ops, opt, segs, 3, p_run, s_run, b3, 3, 1, 3);
	for (int r = 0; r < 3; r++) {
		const float *views[2] = { m_run + b3[r], v_run + b3[r] };

		WT_OK(weft_optim_state_write(fd, path, 0, TOTAL, 2, views, b3[r], b3[r + 1]));
	}
	memset(m_run, 0xff, sizeof(m_run)); /* "a new process": state gone */
	memset(v_run, 0xff, sizeof(v_run));
	split(TOTAL, 2, b2);
	for (int r = 0; r < 2; r++) {
		float *views[2] = { m_run + b2[r], v_run + b2[r] };

		WT_OK(weft_optim_state_read(fd, path, 0, TOTAL, 2, views, b2[r], b2[r + 1]));
	}
	adam_steps(ops, opt, segs, 3, p_run, s_run, b2, 2, 4, 5);
	WT_CHECK(!memcmp(p_run, p_whole, sizeof(p_whole)));
	WT_CHECK(!memcmp(m_run, m_whole, sizeof(m_whole)));
	WT_CHECK(!memcmp(v_run, v_whole, sizeof(v_whole)));

	ops->destroy(opt);
	close(fd);
	unlink(path);
}

int main(void)
{
	reshard();
	resume();
	ot_release();
	return wt_done("test_optim_state");
}
