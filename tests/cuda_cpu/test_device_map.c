/* core/train/device_map.h: local rank r uses GPU r mod count; more ranks
 * than GPUs is refused for nccl with advice and accepted for gloo; the
 * count comes from the CUDA kernel table's device_count (here a fake
 * table registered for CUDA, so no GPU is needed). */
#include "train/device_map.h"
#include "weft_test.h"

static int32_t fake_count = 2;
static int count_calls;

static weft_status fake_device_count(int32_t *out)
{
	count_calls++;
	*out = fake_count;
	return WEFT_OK;
}

static weft_status fake_no_gpu(int32_t *out)
{
	*out = 0;
	return weft_error_set(WEFT_ERR_UNSUPPORTED, "cudaGetDeviceCount found no GPU");
}

static weft_kernel_table fake = {
	.head = WEFT_PLUGIN_HEAD(weft_kernel_table, "cuda"),
	.device_count = fake_device_count,
};

static void test_index(void)
{
	int32_t idx = -1;

	/* one GPU per rank, then round-robin sharing */
	for (int32_t count = 1; count <= 4; count++)
		for (int32_t r = 0; r < 9; r++) {
			WT_OK(weft_device_map_index(r, count, &idx));
			WT_CHECK(idx == r % count && idx >= 0 && idx < count);
		}
	WT_OK(weft_device_map_index(1, 8, &idx));
	WT_CHECK(idx == 1);
	WT_FAILS(weft_device_map_index(0, 0, &idx), WEFT_ERR_INVALID_ARG, "local rank 0 with 0 "
		 "visible GPUs");
	WT_FAILS(weft_device_map_index(-1, 2, &idx), WEFT_ERR_INVALID_ARG, "local rank -1");
}

static void test_check(void)
{
	WT_OK(weft_device_map_check("nccl", 2, 2));
	WT_OK(weft_device_map_check("nccl", 1, 8));
	WT_OK(weft_device_map_check("gloo", 2, 1));
	WT_OK(weft_device_map_check("gloo", 16, 1));
	WT_OK(weft_device_map_check("my_backend", 4, 1));
	WT_FAILS(weft_device_map_check("nccl", 2, 1), WEFT_ERR_UNSUPPORTED,
		 "trainer.comm: nccl: 2 ranks on this node but 1 GPU is visible",
		 "NCCL does not support", "trainer.devices=1 or fewer", "trainer.comm=gloo");
	WT_FAILS(weft_device_map_check("nccl", 5, 4), WEFT_ERR_UNSUPPORTED, "4 GPUs are visible",
		 "trainer.devices=4 or fewer");
}

static void test_apply(void)
{
	weft_device d;

	/* the CPU is left alone and the kernel table is not asked */
	d = WEFT_CPU;
	WT_OK(weft_device_map_apply(&d, 3, 4, "nccl"));
	WT_CHECK(d.type == WEFT_DEVICE_CPU && d.index == 0 && count_calls == 0);

	WT_OK(weft_kernels_register(WEFT_DEVICE_CUDA, &fake));
	for (int32_t r = 0; r < 4; r++) {
		d = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 };
		WT_OK(weft_device_map_apply(&d, r, 4, "gloo"));
		WT_CHECK(d.type == WEFT_DEVICE_CUDA && d.index == r % 2);
	}
	WT_CHECK(count_calls == 4);
	/* two ranks on one GPU (the gpu-check DDP run): both on cuda:0 */
	fake_count = 1;
	for (int32_t r = 0; r < 2; r++) {
		d = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 5 };
		WT_OK(weft_device_map_apply(&d, r, 2, "gloo"));
		WT_CHECK(d.index == 0);
	}
	d = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 };
	WT_FAILS(weft_device_map_apply(&d, 1, 2, "nccl"), WEFT_ERR_UNSUPPORTED,
		 "2 ranks on this node but 1 GPU is visible", "trainer.comm=gloo");
	/* local_world 0 (not launched) counts as one rank */
	WT_OK(weft_device_map_apply(&d, 0, 0, "nccl"));
	WT_CHECK(d.index == 0);
	/* the table's error comes through */
	fake.device_count = fake_no_gpu;
	WT_FAILS(weft_device_map_apply(&d, 0, 1, "nccl"), WEFT_ERR_UNSUPPORTED,
		 "found no GPU");
	/* a table without device_count counts as one GPU */
	fake.device_count = NULL;
	d = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 3 };
	WT_OK(weft_device_map_apply(&d, 3, 4, "gloo"));
	WT_CHECK(d.index == 0);
}

int main(void)
{
	test_index();
	test_check();
	test_apply();
	return wt_done("test_device_map");
}
