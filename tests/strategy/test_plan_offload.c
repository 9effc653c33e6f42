/* weft plan with ZeRO's optimizer offload (offload_optimizer: {device:
 * cpu}): on accelerator cuda the plan puts this rank's optimizer slots,
 * its fp32 master shard and a copy of its gradient shard in host memory
 * (host_bytes) and the rest on the device, for zero_1, zero_2 and zero_3
 * at 2 and 3 ranks: optim (slots + 1) x 4 x shard bytes, all host; grads
 * the run without offload's plus 4 x shard host bytes; params unchanged,
 * all device. Without offload, and on accelerator cpu (where offload is a
 * documented no-op), no host bytes and the plan without offload. Exact:
 * the plan is the strategy's own arithmetic. Runs nothing on a device. */
#include <stdio.h>
#include <string.h>

#include "nn/shapes.h"
#include "plan/plan.h"
#include "weft/config.h"
#include "weft_test.h"

static void plan_of(const char *accel, int stage, int world, int offload, weft_plan *out)
{
	char text[1024];
	weft_config *cfg = NULL;
	weft_model *m = NULL;
	weft_model_options mo = { .device = WEFT_CPU, .no_grads = 1 };
	weft_plan_opts o;

	snprintf(text, sizeof(text), "{trainer: {accelerator: %s, devices: %d, strategy: {name: "
		 "zero_%d%s}}, model: {class: gpt, n_layer: 3, n_head: 2, n_embd: 32, "
		 "vocab_size: 70, block_size: 16}}", accel, world, stage,
		 offload ? ", offload_optimizer: {device: cpu}" : "");
	WT_OK(weft_config_load_string("plan", text, strlen(text), &cfg));
	WT_OK(weft_plan_opts_from_config(weft_config_root(cfg), 0, &o));
	o.n_slots = 2;
	WT_OK(weft_plan_model_options(&o, &mo));
	WT_OK(nn_model_shapes_from_config(weft_cfg_get(weft_config_root(cfg), "model"), &mo, &m));
	WT_OK(weft_plan_compute(weft_model_params(m), &o, out));
	weft_model_free(m);
	weft_config_free(cfg);
}

int main(void)
{
	for (int stage = 1; stage <= 3; stage++)
		for (int world = 2; world <= 3; world++) {
			weft_plan off, on, cpu, cpu_on;
			int64_t shard;

			plan_of("cuda", stage, world, 0, &off);
			plan_of("cuda", stage, world, 1, &on);
			plan_of("cpu", stage, world, 0, &cpu);
			plan_of("cpu", stage, world, 1, &cpu_on);
			/* without offload the optimizer holds 2 slots of the shard */
			shard = off.bytes[WEFT_MEM_OPTIM] / 8;
			WT_CHECK(shard > 0 && off.bytes[WEFT_MEM_OPTIM] == 8 * shard);
			for (int c = 0; c < WEFT_MEM_NUM_CATEGORIES; c++) {
				WT_CHECK(off.host_bytes[c] == 0);
				WT_CHECK(cpu.host_bytes[c] == 0 && cpu_on.host_bytes[c] == 0);
				WT_CHECK(cpu.bytes[c] == off.bytes[c]);
				WT_CHECK(cpu_on.bytes[c] == cpu.bytes[c]);
			}
			WT_CHECK(on.bytes[WEFT_MEM_OPTIM] == 12 * shard);
			WT_CHECK(on.host_bytes[WEFT_MEM_OPTIM] == 12 * shard);
			WT_CHECK(on.bytes[WEFT_MEM_GRADS] == off.bytes[WEFT_MEM_GRADS] + 4 * shard);
			WT_CHECK(on.host_bytes[WEFT_MEM_GRADS] == 4 * shard);
			WT_CHECK(on.bytes[WEFT_MEM_PARAMS] == off.bytes[WEFT_MEM_PARAMS]);
			WT_CHECK(on.host_bytes[WEFT_MEM_PARAMS] == 0);
			WT_CHECK(on.working_grads == off.working_grads &&
				 on.working_params == off.working_params);
			printf("zero_%d, %d ranks, cuda + offload: optim %lld B host, grads %lld B "
			       "host + %lld B device, params %lld B device\n", stage, world,
			       (long long)on.host_bytes[WEFT_MEM_OPTIM],
			       (long long)on.host_bytes[WEFT_MEM_GRADS],
			       (long long)(on.bytes[WEFT_MEM_GRADS] - on.host_bytes[WEFT_MEM_GRADS]),
			       (long long)on.bytes[WEFT_MEM_PARAMS]);
		}
	return wt_done("test_plan_offload");
}
