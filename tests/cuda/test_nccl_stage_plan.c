/* The staging plan of comm nccl for host buffers (plugins/comm/nccl/
 * nccl_stage.h), on the CPU: no GPU is needed to decide which bytes go
 * where, so it is checked everywhere, sanitizers included.
 *
 * The property: a collective run on the plan's scratch area (copy in,
 * the collective on the mapped pointers, copy out) leaves the caller's
 * host memory exactly as the same collective run on the host pointers
 * themselves, for every operation and every in-place form the comm ABI
 * allows (weft/comm.h), on a 3-rank group seen from rank 1, with the other
 * ranks' data made up. The scratch area starts poisoned and is bounds
 * checked by guard bytes; the result must match bit for bit (the
 * simulated collective does the same float additions in the same order
 * on both sides, so any difference is a wrong byte moved, not rounding).
 * Also: a small reduction copies exactly its bytes once each way, a
 * broadcast copies only on the side that needs it, device buffers are
 * never mapped, and capacities are powers of two above the minimum.
 */
#include <stdint.h>
#include <string.h>

#include "weft_test.h"
#include "../../plugins/comm/nccl/nccl_stage.h"

#define WORLD 3
#define RANK 1
#define GUARD 64

enum op { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BCAST_ROOT, BCAST_LEAF, SEND, RECV, ALL_TO_ALL };

/* Another rank's element i (rank r != RANK). */
static float other(int r, int64_t i)
{
	return (float)(r * 1000 + i % 97) + 0.25f;
}

/* The collective on pointers s (n_s floats) and r (n_r floats), as rank
 * RANK of WORLD sees it. Reads everything it needs first, so in-place
 * forms behave as NCCL's do. */
static void run(enum op op, const float *s, int64_t n_s, float *r, int64_t n_r)
{
	float in[1024], out[1024];
	int64_t n;

	if (s)
		memcpy(in, s, (size_t)n_s * sizeof(float));
	switch (op) {
	case ALL_REDUCE:
		for (int64_t i = 0; i < n_r; i++) {
			out[i] = 0.0f;
			for (int k = 0; k < WORLD; k++)
				out[i] += k == RANK ? in[i] : other(k, i);
		}
		break;
	case ALL_GATHER:
		for (int64_t i = 0; i < n_r; i++)
			out[i] = i / n_s == RANK ? in[i % n_s] : other((int)(i / n_s), i);
		break;
	case REDUCE_SCATTER:
		for (int64_t i = 0; i < n_r; i++) {
			out[i] = 0.0f;
			for (int k = 0; k < WORLD; k++)
				out[i] += k == RANK ? in[RANK * n_r + i] : other(k, RANK * n_r + i);
		}
		break;
	case BCAST_ROOT: /* data stays */
		memcpy(out, in, (size_t)n_r * sizeof(float));
		break;
	case BCAST_LEAF:
		for (int64_t i = 0; i < n_r; i++)
			out[i] = other(0, i);
		break;
	case SEND:
		return;
	case RECV:
		for (int64_t i = 0; i < n_r; i++)
			out[i] = other(2, i);
		break;
	case ALL_TO_ALL:
		n = n_s / WORLD;
		for (int64_t i = 0; i < n_r; i++)
			out[i] = i / n == RANK ? in[RANK * n + i % n] : other((int)(i / n), i);
		break;
	}
	memcpy(r, out, (size_t)n_r * sizeof(float));
}

/* One case: host memory `mem` of `len` floats; send at s_at (n_s floats),
 * recv at r_at (n_r); -1 for a side the op does not have. */
static void check_case(const char *name, enum op op, int64_t len, int64_t s_at, int64_t n_s,
		       int64_t r_at, int64_t n_r)
{
	float want[1024], got[1024];
	unsigned char scratch[8192 + 2 * GUARD];
	int copy_in = op != RECV && op != BCAST_LEAF, copy_out = op != SEND && op != BCAST_ROOT;
	int bcast = op == BCAST_ROOT || op == BCAST_LEAF;
	nccl_stage_side s = { 0 }, r = { 0 };
	nccl_stage_plan p;
	int guard_ok = 1, same;

	for (int64_t i = 0; i < len; i++)
		want[i] = got[i] = (float)i * 0.5f - 3.0f;
	if (s_at >= 0)
		s = (nccl_stage_side){ .data = got + s_at, .bytes = (size_t)n_s * 4, .host = 1,
				       .used = 1, .copy = copy_in };
	if (r_at >= 0)
		r = (nccl_stage_side){ .data = got + r_at, .bytes = (size_t)n_r * 4, .host = 1,
				       .used = 1, .copy = copy_out };
	nccl_stage_plan_make(&s, &r, &p);
	WT_REQUIRE(p.staged && p.bytes <= 8192);

	/* on the host, directly */
	run(op, s_at >= 0 ? want + s_at : NULL, n_s, r_at >= 0 ? want + r_at : want,
	    r_at >= 0 ? n_r : 0);

	/* staged: poisoned scratch, copy in, run there, copy out */
	memset(scratch, 0xA5, sizeof(scratch));
	if (p.in_bytes)
		memcpy(scratch + GUARD + p.in_off, s.data, p.in_bytes);
	run(op, s_at >= 0 ? (const float *)(scratch + GUARD + p.send_off) : NULL, n_s,
	    r_at >= 0 ? (float *)(scratch + GUARD + p.recv_off) : (float *)(scratch + GUARD),
	    r_at >= 0 ? n_r : 0);
	if (p.out_bytes)
		memcpy((void *)r.data, scratch + GUARD + p.out_off, p.out_bytes);
	for (size_t i = 0; i < GUARD; i++)
		guard_ok &= scratch[i] == 0xA5 && scratch[GUARD + p.bytes + i] == 0xA5;

	same = memcmp(want, got, (size_t)len * sizeof(float)) == 0;
	if (!same || !guard_ok)
		fprintf(stderr, "case %s: host memory %s, guards %s\n", name,
			same ? "equal" : "DIFFERS", guard_ok ? "intact" : "OVERWRITTEN");
	WT_CHECK(same);
	WT_CHECK(guard_ok);
	/* the bytes read go in once, the bytes written come out once, no more */
	WT_CHECK(p.in_bytes == (copy_in && s_at >= 0 ? (size_t)n_s * 4 : 0));
	WT_CHECK(p.out_bytes == (copy_out && r_at >= 0 ? (size_t)n_r * 4 : 0));
	if (bcast || (s_at >= 0 && r_at >= 0 && s_at < r_at + n_r && r_at < s_at + n_s))
		WT_CHECK(p.recv_off - p.send_off == (size_t)(r_at - s_at) * 4); /* aliasing kept */
	else if (s_at >= 0 && r_at >= 0) /* apart on the host: apart in the scratch */
		WT_CHECK(p.send_off + s.bytes <= p.recv_off || p.recv_off + r.bytes <= p.send_off);
}

static void test_every_form(void)
{
	/* n = 8 floats per rank block */
	check_case("all_reduce", ALL_REDUCE, 40, 0, 8, 16, 8);
	check_case("all_reduce in place", ALL_REDUCE, 40, 4, 8, 4, 8);
	check_case("all_gather", ALL_GATHER, 40, 0, 8, 8, 24);
	check_case("all_gather in place", ALL_GATHER, 40, 8 + RANK * 8, 8, 8, 24);
	check_case("reduce_scatter", REDUCE_SCATTER, 40, 0, 24, 30, 8);
	check_case("reduce_scatter in place", REDUCE_SCATTER, 40, 2, 24, 2 + RANK * 8, 8);
	check_case("broadcast root", BCAST_ROOT, 20, 3, 8, 3, 8);
	check_case("broadcast leaf", BCAST_LEAF, 20, 3, 8, 3, 8);
	check_case("send", SEND, 20, 5, 8, -1, 0);
	check_case("recv", RECV, 20, -1, 0, 5, 8);
	check_case("all_to_all", ALL_TO_ALL, 60, 0, 24, 30, 24);
	/* recv below send: the region starts at recv */
	check_case("all_reduce recv first", ALL_REDUCE, 40, 20, 8, 2, 8);
}

static void test_small_and_mixed(void)
{
	double red[2] = { 1.5, 4.0 };
	float dev[16];
	nccl_stage_side s = { .data = red, .bytes = sizeof(red), .host = 1, .used = 1, .copy = 1 };
	nccl_stage_side r = s, none = { 0 };
	nccl_stage_plan p;

	/* ddp's loss: two doubles in place, 16 bytes each way, one region */
	nccl_stage_plan_make(&s, &r, &p);
	WT_CHECK(p.staged && p.bytes == 16 && p.in_bytes == 16 && p.out_bytes == 16);
	WT_CHECK(p.send_mapped && p.recv_mapped && p.send_off == 0 && p.recv_off == 0);

	/* device buffers: nothing staged, nothing mapped */
	s = (nccl_stage_side){ .data = dev, .bytes = sizeof(dev), .used = 1, .copy = 1 };
	r = s;
	nccl_stage_plan_make(&s, &r, &p);
	WT_CHECK(!p.staged && !p.send_mapped && !p.recv_mapped && p.bytes == 0);
	WT_CHECK(p.in_bytes == 0 && p.out_bytes == 0);

	/* device send, host recv: only recv is staged, at offset 0 */
	r = (nccl_stage_side){ .data = red, .bytes = sizeof(red), .host = 1, .used = 1, .copy = 1 };
	nccl_stage_plan_make(&s, &r, &p);
	WT_CHECK(p.staged && !p.send_mapped && p.recv_mapped && p.recv_off == 0);
	WT_CHECK(p.bytes == sizeof(red) && p.in_bytes == 0 && p.out_bytes == sizeof(red));

	/* host send, device recv: only send is staged */
	nccl_stage_plan_make(&r, &s, &p);
	WT_CHECK(p.staged && p.send_mapped && !p.recv_mapped && p.in_bytes == sizeof(red));
	WT_CHECK(p.out_bytes == 0);

	/* separate host buffers: recv after send, aligned, no overlap */
	{
		double other_buf[3];
		nccl_stage_side r2 = { .data = other_buf, .bytes = sizeof(other_buf), .host = 1,
				       .used = 1, .copy = 1 };

		s = (nccl_stage_side){ .data = red, .bytes = sizeof(red), .host = 1, .used = 1,
				       .copy = 1 };
		nccl_stage_plan_make(&s, &r2, &p);
		WT_CHECK(p.send_off == 0 && p.recv_off == NCCL_STAGE_ALIGN);
		WT_CHECK(p.bytes == NCCL_STAGE_ALIGN + sizeof(other_buf));
	}

	/* a zero-length host buffer still gets a (scratch) device pointer */
	s = (nccl_stage_side){ .data = NULL, .bytes = 0, .host = 1, .used = 1, .copy = 1 };
	nccl_stage_plan_make(&s, &s, &p);
	WT_CHECK(p.staged && p.send_mapped && p.recv_mapped && p.bytes == 0);
	WT_CHECK(p.in_bytes == 0 && p.out_bytes == 0);

	/* a side the call does not use is ignored even if it says host */
	nccl_stage_plan_make(&none, &none, &p);
	WT_CHECK(!p.staged);
}

static void test_capacity(void)
{
	WT_CHECK(nccl_stage_capacity(0, 4096) == 4096);
	WT_CHECK(nccl_stage_capacity(16, 4096) == 4096);
	WT_CHECK(nccl_stage_capacity(4096, 4096) == 4096);
	WT_CHECK(nccl_stage_capacity(4097, 4096) == 8192);
	WT_CHECK(nccl_stage_capacity(1000000, 4096) == 1048576);
	WT_CHECK(nccl_stage_capacity(SIZE_MAX - 5, 4096) == SIZE_MAX - 5);
	WT_CHECK(nccl_stage_capacity(3, 0) == 4);
}

int main(void)
{
	test_every_form();
	test_small_and_mixed();
	test_capacity();
	return wt_done("test_nccl_stage_plan");
}
