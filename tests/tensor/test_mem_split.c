/* The host/device split of the memory accounting (weft/memory.h):
 *   - weft_mem_account and weft_mem_alloc count in the totals and the
 *     host's counters, weft_mem_account_device in the totals and the
 *     device's, per category, exactly (to the byte);
 *   - each set keeps its own peaks: the host's peak total is not the
 *     totals' peak less the device's (host and device peak at different
 *     moments here);
 *   - weft_mem_reset_peaks resets all three sets to their current values;
 *   - the host table's mem_account_device (ABI 1.5) is the same call;
 *   - a category out of range counts as "other", as weft_mem_account's. */
#include <stdlib.h>

#include "tensor_testutil.h"
#include "weft/plugin.h"

static void check_zero_device(void)
{
	weft_mem_stats d;

	weft_mem_get_split_stats(NULL, &d);
	for (int c = 0; c < WEFT_MEM_NUM_CATEGORIES; c++)
		WT_CHECK(d.current[c] == 0 && d.peak[c] == 0);
	WT_CHECK(d.current_total == 0 && d.peak_total == 0);
}

int main(void)
{
	weft_mem_stats a0, h0, a1, h1, d1;
	void *p;

	/* a process that never touched a device has no device bytes */
	p = weft_mem_alloc(WEFT_MEM_PARAMS, 1000);
	WT_REQUIRE(p != NULL);
	check_zero_device();
	weft_mem_free(p);

	weft_mem_reset_peaks();
	weft_mem_get_stats(&a0);
	weft_mem_get_split_stats(&h0, NULL);
	/* host: 4000 optim bytes, then freed; device: 3000 params bytes after */
	p = weft_mem_alloc(WEFT_MEM_OPTIM, 4000);
	WT_REQUIRE(p != NULL);
	weft_mem_account(WEFT_MEM_GRADS, 500);
	weft_mem_free(p);
	weft_mem_account_device(WEFT_MEM_PARAMS, 3000);
	weft_host_services()->mem_account_device(WEFT_MEM_GRADS, 200);
	weft_mem_account_device((weft_mem_category)99, 7);
	weft_mem_get_stats(&a1);
	weft_mem_get_split_stats(&h1, &d1);

	/* device: only what it was told, per category */
	WT_CHECK(d1.current[WEFT_MEM_PARAMS] == 3000 && d1.peak[WEFT_MEM_PARAMS] == 3000);
	WT_CHECK(d1.current[WEFT_MEM_GRADS] == 200 && d1.peak[WEFT_MEM_GRADS] == 200);
	WT_CHECK(d1.current[WEFT_MEM_OTHER] == 7);
	WT_CHECK(d1.current[WEFT_MEM_OPTIM] == 0 && d1.peak[WEFT_MEM_OPTIM] == 0);
	WT_CHECK(d1.current_total == 3207 && d1.peak_total == 3207);
	/* host: the block and the accounted grads, none of the device's */
	WT_CHECK(h1.peak[WEFT_MEM_OPTIM] - h0.current[WEFT_MEM_OPTIM] == 4000);
	WT_CHECK(h1.current[WEFT_MEM_OPTIM] == h0.current[WEFT_MEM_OPTIM]);
	WT_CHECK(h1.current[WEFT_MEM_GRADS] - h0.current[WEFT_MEM_GRADS] == 500);
	WT_CHECK(h1.current[WEFT_MEM_PARAMS] == h0.current[WEFT_MEM_PARAMS]);
	WT_CHECK(h1.peak_total - h0.current_total == 4500);
	/* totals: both, per category; the totals' peak (host 500 + device
	 * 3207 after the free = 3707 < 4500) is the host's here */
	for (int c = 0; c < WEFT_MEM_NUM_CATEGORIES; c++)
		WT_CHECK(a1.current[c] == h1.current[c] + d1.current[c]);
	WT_CHECK(a1.current_total == h1.current_total + d1.current_total);
	WT_CHECK(a1.current[WEFT_MEM_PARAMS] - a0.current[WEFT_MEM_PARAMS] == 3000);
	WT_CHECK(a1.peak_total - a0.current_total == 4500);
	WT_CHECK(a1.peak_total < h1.peak_total + d1.peak_total);

	/* a reset brings every set's peaks to its current values */
	weft_mem_reset_peaks();
	weft_mem_get_stats(&a1);
	weft_mem_get_split_stats(&h1, &d1);
	WT_CHECK(a1.peak_total == a1.current_total && h1.peak_total == h1.current_total);
	WT_CHECK(d1.peak_total == 3207 && d1.peak[WEFT_MEM_PARAMS] == 3000);
	WT_CHECK(h1.peak[WEFT_MEM_OPTIM] == h1.current[WEFT_MEM_OPTIM]);

	/* freeing the device bytes brings its counters to 0, peaks kept */
	weft_mem_account_device(WEFT_MEM_PARAMS, -3000);
	weft_mem_account_device(WEFT_MEM_GRADS, -200);
	weft_mem_account_device(WEFT_MEM_OTHER, -7);
	weft_mem_account(WEFT_MEM_GRADS, -500);
	weft_mem_get_split_stats(NULL, &d1);
	WT_CHECK(d1.current_total == 0 && d1.peak_total == 3207);
	weft_mem_reset_peaks();
	check_zero_device();
	return wt_done("test_mem_split");
}
