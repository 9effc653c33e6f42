/* The start banner, the model summary table (Lightning's layout and
 * parameter counts) and summary.json parsed back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "runlog/report.h"
#include "weft/memory.h"
#include "weft_test.h"

static char *read_all(FILE *f)
{
	static char buf[8192];
	size_t n;

	fflush(f);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	return buf;
}

int main(void)
{
	char b[32], path[64];
	FILE *f;

	/* Lightning's get_human_readable_count values. */
	WT_CHECK(strcmp(weft_human_count(0, b, sizeof(b)), "0") == 0);
	WT_CHECK(strcmp(weft_human_count(123, b, sizeof(b)), "123") == 0);
	WT_CHECK(strcmp(weft_human_count(1234, b, sizeof(b)), "1.2 K") == 0);
	WT_CHECK(strcmp(weft_human_count(101770, b, sizeof(b)), "101 K") == 0);
	WT_CHECK(strcmp(weft_human_count(2000000, b, sizeof(b)), "2.0 M") == 0);
	WT_CHECK(strcmp(weft_human_count(124439808, b, sizeof(b)), "124 M") == 0);
	WT_CHECK(strcmp(weft_human_count(3000000000LL, b, sizeof(b)), "3.0 B") == 0);
	WT_CHECK(strcmp(weft_human_count(5000000000000000LL, b, sizeof(b)), "5000 T") == 0);

	f = tmpfile();
	WT_REQUIRE(f);
	weft_print_model_summary(f, (weft_summary_row[]){ { "l1", "Linear", 200960 },
							   { "act", "ReLU", 0 },
							   { "l2", "Linear", 2570 } },
				 3, 203530, 0, 203530 * 4);
	WT_CHECK(strcmp(read_all(f),
			"  | Name | Type   | Params\n"
			"--------------------------\n"
			"0 | l1   | Linear | 200 K \n"
			"1 | act  | ReLU   | 0     \n"
			"2 | l2   | Linear | 2.6 K \n"
			"--------------------------\n"
			"203 K      Trainable params\n"
			"0          Non-trainable params\n"
			"203 K      Total params\n"
			"0.814      Total estimated model params size (MB)\n") == 0);
	fclose(f);

	f = tmpfile();
	weft_print_banner(f, &(weft_run_banner){ .accelerator = "cpu", .devices = 2,
						  .num_nodes = 1, .world_size = 2, .global_rank = 0,
						  .strategy = "ddp", .comm = "gloo",
						  .precision = "32-true" });
	{
		char *out = read_all(f);

		WT_STR_CONTAINS(out, "GPU available: False, used: False\n");
		WT_STR_CONTAINS(out, "Accelerator: cpu, devices: 2, nodes: 1, precision: 32-true\n");
		WT_STR_CONTAINS(out, "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n");
		WT_STR_CONTAINS(out, "strategy=ddp, distributed_backend=gloo\n");
		WT_STR_CONTAINS(out, "Starting with 2 processes\n");
	}
	fclose(f);

	/* summary.json round trip. */
	{
		weft_mem_stats mem = { .peak = { 100, 100, 200, 4096, 64, 8 }, .peak_total = 4500 };
		weft_json_value *v = NULL;
		const weft_json_value *x;

		snprintf(path, sizeof(path), "summary_test_%ld.json", (long)getpid());
		WT_OK(weft_run_summary_write(path, &(weft_run_summary){
			.strategy = "zero_2", .comm = "gloo", .world_size = 3, .steps = 500,
			.epochs = 2, .wall_seconds = 12.5,
			.final_metrics = (weft_metric[]){ { "val_loss", 0.25 }, { "val_acc", 0.9 } },
			.n_final_metrics = 2, .throughput = 1234.5, .throughput_unit = "samples/s",
			.step_time = (weft_metric[]){ { "forward", 0.01 }, { "comm", 0.002 } },
			.n_step_time = 2, .memory = &mem }));
		WT_OK(weft_json_parse_file(path, &v));
		WT_CHECK(strcmp(weft_json_get(v, "strategy")->string, "zero_2") == 0);
		WT_CHECK(weft_json_get(v, "world_size")->integer == 3);
		x = weft_json_get(weft_json_get(v, "final_metrics"), "val_acc");
		WT_CHECK(x && x->number == 0.9);
		x = weft_json_get(v, "throughput");
		WT_CHECK(weft_json_get(x, "value")->number == 1234.5);
		WT_CHECK(strcmp(weft_json_get(x, "unit")->string, "samples/s") == 0);
		x = weft_json_get(v, "peak_bytes");
		WT_CHECK(weft_json_get(x, "activations")->integer == 4096);
		WT_CHECK(weft_json_get(x, "total")->integer == 4500);
		WT_CHECK(weft_json_get(weft_json_get(v, "step_time_s"), "comm")->number == 0.002);
		weft_json_free(v);
		remove(path);
		WT_FAILS(weft_run_summary_write("/nonexistent-dir-for-weft/summary.json",
						&(weft_run_summary){ 0 }),
			 WEFT_ERR_IO, "/nonexistent-dir-for-weft/summary.json");
	}
	return wt_done("test_report");
}
