/* Dtypes and half floats, devices, tensors and views, flat parameter sets,
 * arenas, thread settings, accuracy. */
#include <stdlib.h>

#include "tensor_testutil.h"
#include "weft/device.h"

static void test_dtypes(void)
{
	static const char *names[] = { "F32", "F16", "BF16", "I32", "I64", "U8", "U16" };
	static const size_t sizes[] = { 4, 2, 2, 4, 8, 1, 2 };
	weft_dtype dt;

	for (int i = 0; i < WEFT_DTYPE_COUNT; i++) {
		WT_CHECK(!strcmp(weft_dtype_name((weft_dtype)i), names[i]));
		WT_CHECK(weft_dtype_size((weft_dtype)i) == sizes[i]);
		WT_OK(weft_dtype_parse(names[i], &dt));
		WT_CHECK(dt == (weft_dtype)i);
	}
	WT_OK(weft_dtype_parse("bfloat16", &dt));
	WT_CHECK(dt == WEFT_BF16);
	WT_CHECK(!strcmp(weft_dtype_name((weft_dtype)99), "unknown"));
	WT_CHECK(weft_dtype_size((weft_dtype)99) == 0);
}

static void test_half(void)
{
	/* exact bit patterns from IEEE 754 binary16 and bfloat16 */
	WT_CHECK(weft_f32_to_f16(1.0f) == 0x3c00);
	WT_CHECK(weft_f32_to_f16(-2.0f) == 0xc000);
	WT_CHECK(weft_f32_to_f16(65504.0f) == 0x7bff);
	WT_CHECK(weft_f32_to_f16(65520.0f) == 0x7c00);         /* rounds to infinity */
	WT_CHECK(weft_f32_to_f16(5.9604645e-8f) == 0x0001);    /* smallest subnormal */
	WT_CHECK(weft_f32_to_f16(2.98023224e-8f) == 0x0000);   /* half of it: ties to even 0 */
	WT_CHECK(weft_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00); /* tie: to even */
	WT_CHECK(weft_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02); /* tie: to even (up) */
	WT_CHECK((weft_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (weft_f32_to_f16(NAN) & 0x3ff));
	WT_CHECK(weft_f16_to_f32(0x3555) == 0.333251953125f);
	WT_CHECK(weft_f16_to_f32(0x0001) == 5.9604645e-8f);
	WT_CHECK(weft_f16_to_f32(0xfc00) == -INFINITY);
	WT_CHECK(weft_f32_to_bf16(1.0f) == 0x3f80);
	WT_CHECK(weft_f32_to_bf16(3.140625f) == 0x4049);
	WT_CHECK(weft_f32_to_bf16(1.0f + 1.0f / 256) == 0x3f80); /* tie: to even */
	WT_CHECK(weft_f32_to_bf16(1.0f + 3.0f / 256) == 0x3f82);
	WT_CHECK(weft_bf16_to_f32(0xc040) == -3.0f);
	/* every f16 value survives f16 -> f32 -> f16 */
	int bad = 0;
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = weft_f16_to_f32((uint16_t)h);

		if (isnan(f))
			continue;
		bad += weft_f32_to_f16(f) != h;
	}
	WT_CHECK(bad == 0);
	{
		float src[3] = { 1.5f, -0.25f, 1000.0f }, back[3];
		uint16_t mid[3];

		WT_OK(weft_convert_host(3, WEFT_F32, src, WEFT_BF16, mid));
		WT_OK(weft_convert_host(3, WEFT_BF16, mid, WEFT_F32, back));
		for (int i = 0; i < 3; i++)
			WT_CHECK(back[i] == src[i]); /* all exactly representable */
		WT_FAILS(weft_convert_host(3, WEFT_I32, src, WEFT_F32, back), WEFT_ERR_DTYPE,
			 "I32 to F32");
	}
}

static void test_devices(void)
{
	weft_device d;
	char buf[32];

	WT_OK(weft_device_parse("cpu", &d));
	WT_CHECK(d.type == WEFT_DEVICE_CPU);
	WT_OK(weft_device_parse("cuda:3", &d));
	WT_CHECK(d.type == WEFT_DEVICE_CUDA && d.index == 3);
	WT_CHECK(!strcmp(weft_device_str(d, buf, sizeof(buf)), "cuda:3"));
	WT_OK(weft_device_parse("cuda", &d));
	WT_CHECK(d.index == 0);
	WT_FAILS(weft_device_parse("gpu0", &d), WEFT_ERR_INVALID_ARG, "'gpu0'", "'cuda:N'");
	WT_FAILS(weft_device_parse("cuda:x", &d), WEFT_ERR_INVALID_ARG, "'cuda:x'");
}

static void test_tensors(void)
{
	int64_t s[2] = { 3, 4 }, vs[1] = { 4 };
	weft_tensor *t, *v, *u;
	float host[12], back[12];
	char buf[64];
	weft_mem_stats m0, m1;

	weft_mem_get_stats(&m0);
	WT_OK(weft_tensor_alloc("t", WEFT_F32, 2, s, WEFT_CPU, WEFT_MEM_OPTIM, &t));
	weft_mem_get_stats(&m1);
	WT_CHECK(m1.current[WEFT_MEM_OPTIM] - m0.current[WEFT_MEM_OPTIM] == 48);
	WT_CHECK(weft_tensor_numel(t) == 12 && weft_tensor_nbytes(t) == 48);
	WT_CHECK(!strcmp(weft_shape_str(t, buf, sizeof(buf)), "[3, 4]"));
	WT_CHECK(((float *)t->data)[11] == 0.0f);
	for (int i = 0; i < 12; i++)
		host[i] = (float)i;
	WT_OK(weft_tensor_copy_from_host(t, host, sizeof(host)));
	WT_FAILS(weft_tensor_copy_from_host(t, host, 8), WEFT_ERR_SHAPE, "'t'", "48 bytes", "8");
	/* a view of row 1 shares the buffer */
	WT_OK(weft_tensor_view(t, 4, 1, vs, &v));
	WT_CHECK(v->base == t->base && v->offset == 16 && ((float *)v->data)[0] == 4.0f);
	WT_OK(weft_tensor_fill(v, 7.0f));
	WT_OK(weft_tensor_copy_to_host(t, back, sizeof(back)));
	WT_CHECK(back[3] == 3.0f && back[4] == 7.0f && back[7] == 7.0f && back[8] == 8.0f);
	WT_OK(weft_tensor_alloc(NULL, WEFT_F32, 1, vs, WEFT_CPU, WEFT_MEM_OTHER, &u));
	WT_OK(weft_tensor_copy(u, v));
	WT_CHECK(((float *)u->data)[2] == 7.0f);
	weft_tensor_free(u);
	weft_tensor_free(v);
	weft_tensor_free(t);
	weft_mem_get_stats(&m1);
	WT_CHECK(m1.current[WEFT_MEM_OPTIM] == m0.current[WEFT_MEM_OPTIM]);
	WT_CHECK(m1.current[WEFT_MEM_OTHER] == m0.current[WEFT_MEM_OTHER]);
}

static void test_params(void)
{
	int64_t sa[2] = { 2, 3 }, sb[1] = { 4 }, sc[1] = { 5 };
	weft_params *ps;
	weft_tensor *a, *b, *c, *flat, *flat_grad, *ci;
	weft_mem_stats m0, m1;

	weft_mem_get_stats(&m0);
	WT_OK(weft_params_create(WEFT_CPU, &ps));
	WT_OK(weft_params_add(ps, "a.weight", WEFT_F32, 2, sa, &a));
	WT_OK(weft_params_add(ps, "ids", WEFT_I32, 1, sc, &ci));
	WT_OK(weft_params_add(ps, "b.bias", WEFT_F32, 1, sb, &b));
	WT_OK(weft_params_add(ps, "c", WEFT_F32, 1, sc, &c));
	WT_CHECK(a->data == NULL);
	WT_OK(weft_params_finalize(ps, 1));
	weft_mem_get_stats(&m1);
	/* one flat buffer per dtype, declaration order, no padding */
	WT_CHECK(m1.current[WEFT_MEM_PARAMS] - m0.current[WEFT_MEM_PARAMS] == (6 + 4 + 5) * 4 + 5 * 4);
	WT_CHECK(m1.current[WEFT_MEM_GRADS] - m0.current[WEFT_MEM_GRADS] == (6 + 4 + 5) * 4 + 5 * 4);
	weft_params_flat(ps, WEFT_F32, &flat, &flat_grad);
	WT_REQUIRE(flat && flat_grad);
	WT_CHECK(weft_tensor_numel(flat) == 15 && weft_params_numel(ps, WEFT_F32) == 15);
	WT_CHECK(a->data == flat->data && a->offset == 0);
	WT_CHECK((char *)b->data == (char *)flat->data + 24 && b->offset == 24);
	WT_CHECK((char *)c->data == (char *)flat->data + 40 && c->offset == 40);
	WT_CHECK(ci->offset == 0 && ci->base != flat->base);
	WT_CHECK((char *)c->grad->data == (char *)flat_grad->data + 40);
	WT_CHECK(c->grad->offset == c->offset);
	WT_CHECK(weft_params_find(ps, "b.bias") == b && weft_params_find(ps, "nope") == NULL);
	WT_CHECK(weft_params_at(ps, 1) == ci && weft_params_at(ps, 4) == NULL);
	WT_CHECK(weft_params_count(ps) == 4 && c->param_index == 3);
	WT_CHECK((a->flags & WEFT_TENSOR_PARAM) && (a->flags & WEFT_TENSOR_REQUIRES_GRAD));
	((float *)flat_grad->data)[7] = 3.0f;
	WT_OK(weft_params_zero_grad(ps));
	WT_CHECK(((float *)b->grad->data)[1] == 0.0f);
	WT_FAILS(weft_params_add(ps, "late", WEFT_F32, 1, sb, &a), WEFT_ERR_INVALID_ARG,
		 "'late'", "already finalized");
	weft_params_free(ps);
	weft_mem_get_stats(&m1);
	WT_CHECK(m1.current[WEFT_MEM_PARAMS] == m0.current[WEFT_MEM_PARAMS]);
	WT_CHECK(m1.current[WEFT_MEM_GRADS] == m0.current[WEFT_MEM_GRADS]);
	WT_CHECK(m1.current_total == m0.current_total);
}

static void test_arena(void)
{
	weft_arena *a;
	weft_arena_stats st;
	weft_mem_stats m0, m1;
	void *p[10];

	weft_mem_get_stats(&m0);
	WT_OK(weft_arena_create(WEFT_CPU, WEFT_MEM_COMM, 1000, &a));
	for (int cycle = 0; cycle < 3; cycle++) {
		weft_arena_reset(a);
		for (int i = 0; i < 10; i++) {
			WT_OK(weft_arena_alloc(a, 300, 0, &p[i]));
			WT_CHECK(((uintptr_t)p[i] & 63) == 0);
			memset(p[i], i, 300);
		}
		for (int i = 0; i < 10; i++)
			WT_CHECK(((unsigned char *)p[i])[299] == i); /* no overlap */
		weft_arena_get_stats(a, &st);
		/* cycle 0 grows 1000 -> 2000 -> 4000 (3 blocks); the reset before cycle 1
		 * replaces them with one block; nothing after that */
		WT_CHECK(st.block_allocs == (cycle == 0 ? 3 : 4));
	}
	WT_CHECK(st.high_water >= 3000 && st.capacity >= st.high_water);
	weft_mem_get_stats(&m1);
	WT_CHECK(m1.current[WEFT_MEM_COMM] - m0.current[WEFT_MEM_COMM] == (int64_t)st.capacity);
	WT_FAILS(weft_arena_alloc(a, 8, 3, &p[0]), WEFT_ERR_INVALID_ARG, "alignment 3");
	weft_mem_fail_after(1);
	WT_FAILS(weft_arena_alloc(a, 1u << 20, 0, &p[0]), WEFT_ERR_NOMEM, "comm arena",
		 "out of memory");
	weft_mem_fail_after(0);
	WT_CHECK(p[0] == NULL);
	weft_arena_free(a);
	weft_mem_get_stats(&m1);
	WT_CHECK(m1.current[WEFT_MEM_COMM] == m0.current[WEFT_MEM_COMM]);

	/* the reset that consolidates never holds the old blocks and their
	 * replacement at once: the peak over it is the larger of the two */
	WT_OK(weft_arena_create(WEFT_CPU, WEFT_MEM_COMM, 1000, &a));
	for (int i = 0; i < 10; i++)
		WT_OK(weft_arena_alloc(a, 300, 0, &p[i]));
	weft_arena_get_stats(a, &st);
	{
		size_t before = st.capacity;

		WT_CHECK(before >= 7000); /* 1000 + 2000 + 4000 */
		weft_mem_reset_peaks();
		weft_arena_reset(a);
		weft_arena_get_stats(a, &st);
		weft_mem_get_stats(&m1);
		WT_CHECK(st.capacity >= 3000 && st.block_allocs == 4);
		WT_CHECK(m1.peak[WEFT_MEM_COMM] - m0.current[WEFT_MEM_COMM] <=
			 (int64_t)(before > st.capacity ? before : st.capacity));
	}
	weft_arena_free(a);
}

static void test_threads(void)
{
	unsetenv("WEFT_NUM_THREADS");
	unsetenv("OPENBLAS_NUM_THREADS");
	unsetenv("OMP_NUM_THREADS");
	WT_CHECK(weft_cpu_threads_resolve(3, 8) == 3);
	int64_t cores = weft_cpu_threads_resolve(0, 1);
	WT_CHECK(cores >= 1);
	WT_CHECK(weft_cpu_threads_resolve(0, 2) == (cores / 2 ? cores / 2 : 1));
	WT_CHECK(weft_cpu_threads_resolve(0, 1000) == 1);
	setenv("OMP_NUM_THREADS", "5", 1);
	WT_CHECK(weft_cpu_threads_resolve(0, 2) == 5);
	setenv("WEFT_NUM_THREADS", "6", 1);
	WT_CHECK(weft_cpu_threads_resolve(0, 2) == 6);
	setenv("WEFT_NUM_THREADS", "zero", 1);
	WT_CHECK(weft_cpu_threads_resolve(0, 2) == 5);
	weft_cpu_set_threads(1);
	WT_CHECK(weft_cpu_get_threads() == 1);
}

static void test_accuracy(void)
{
	int64_t sl[2] = { 4, 3 }, st[1] = { 4 };
	float logits[12] = { 1, 2, 3, /* 2 */ 5, 5, 0, /* tie: 0 */ 0, 1, 0, /* 1 */ 9, 0, 0 };
	int64_t tg[4] = { 2, 0, 2, -100 }, correct, counted;
	weft_tensor l, t;
	weft_ctx *ctx;

	WT_OK(weft_ctx_create(NULL, &ctx));
	WT_OK(weft_tensor_init(&l, WEFT_F32, 2, sl, WEFT_CPU, logits));
	WT_OK(weft_tensor_init(&t, WEFT_I64, 1, st, WEFT_CPU, tg));
	WT_OK(weft_op_accuracy(ctx, &l, &t, -100, &correct, &counted));
	WT_CHECK(correct == 2 && counted == 3);
	weft_ctx_free(ctx);
}

int main(void)
{
	test_dtypes();
	test_half();
	test_devices();
	test_tensors();
	test_params();
	test_arena();
	test_threads();
	test_accuracy();
	return wt_done("test_tensor_basics");
}
