/* The distributed sampler against PyTorch DistributedSampler's rules:
 * sizes, padding by repetition, drop_last, rank striding; shuffles are
 * permutations, deterministic per (seed, epoch), different across epochs,
 * and unbiased (checked statistically). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "data/sampler.h"
#include "weft_test.h"

static int64_t ranks_of(int64_t n, int64_t world, int shuffle, int drop_last, uint64_t seed,
			int64_t epoch, int64_t out[][64], int64_t *per_rank)
{
	for (int64_t r = 0; r < world; r++) {
		weft_sampler s;

		WT_OK(weft_sampler_init(&s, n, world, r, shuffle, seed, drop_last));
		weft_sampler_set_epoch(&s, epoch);
		*per_rank = s.num_samples;
		memcpy(out[r], s.indices, (size_t)s.num_samples * sizeof(int64_t));
		weft_sampler_free(&s);
	}
	return *per_rank;
}

int main(void)
{
	int64_t got[4][64], per = 0;
	weft_sampler s;

	/* N = 10, world = 3, no shuffle: PyTorch gives
	 * indices 0..9 + [0, 1] -> rank0 0,3,6,9; rank1 1,4,7,0; rank2 2,5,8,1. */
	ranks_of(10, 3, 0, 0, 0, 0, got, &per);
	WT_CHECK(per == 4);
	WT_CHECK(got[0][0] == 0 && got[0][1] == 3 && got[0][2] == 6 && got[0][3] == 9);
	WT_CHECK(got[1][0] == 1 && got[1][1] == 4 && got[1][2] == 7 && got[1][3] == 0);
	WT_CHECK(got[2][0] == 2 && got[2][1] == 5 && got[2][2] == 8 && got[2][3] == 1);
	/* drop_last: num_samples = floor(10 / 3) = 3, indices cut to 9. */
	ranks_of(10, 3, 0, 1, 0, 0, got, &per);
	WT_CHECK(per == 3);
	WT_CHECK(got[0][2] == 6 && got[1][2] == 7 && got[2][2] == 8);
	/* Padding longer than the dataset repeats it (N = 2, world = 4,
	 * num_samples 1: indices 0,1,0,1). */
	ranks_of(2, 4, 0, 0, 0, 0, got, &per);
	WT_CHECK(per == 1 && got[0][0] == 0 && got[1][0] == 1 && got[2][0] == 0 &&
		 got[3][0] == 1);

	/* Shuffled, N = 12 over 3 ranks: together a permutation of 0..11. */
	{
		int seen[12] = { 0 };
		int64_t again[4][64], other[4][64];
		int differ = 0;

		ranks_of(12, 3, 1, 0, 42, 5, got, &per);
		for (int r = 0; r < 3; r++)
			for (int i = 0; i < per; i++)
				seen[got[r][i]]++;
		for (int i = 0; i < 12; i++)
			WT_CHECK(seen[i] == 1);
		ranks_of(12, 3, 1, 0, 42, 5, again, &per);
		for (int r = 0; r < 3; r++)
			WT_CHECK(memcmp(got[r], again[r], sizeof(int64_t) * (size_t)per) == 0);
		ranks_of(12, 3, 1, 0, 42, 6, other, &per);
		for (int r = 0; r < 3; r++)
			for (int i = 0; i < per; i++)
				differ += other[r][i] != got[r][i];
		/* Two independent permutations of 12 agree on ~1 place on average;
		 * all 12 agreeing has probability 1/12!. */
		WT_CHECK(differ > 0);
		/* With padding, rank 1's last index is the permutation's first. */
		ranks_of(10, 3, 1, 0, 7, 0, got, &per);
		WT_CHECK(got[1][3] == got[0][0]);
	}

	/* Unbiased: over 6000 epochs, where index 0 lands among 6 positions
	 * is uniform. Chi-square with 5 degrees of freedom: 20.5 is the 0.999
	 * quantile, so a correct sampler fails this 1 time in 1000 seeds; this
	 * seed is fixed, so the test is deterministic. */
	{
		int64_t count[6] = { 0 };
		double chi = 0;

		WT_OK(weft_sampler_init(&s, 6, 1, 0, 1, 1234, 0));
		for (int e = 0; e < 6000; e++) {
			weft_sampler_set_epoch(&s, e);
			for (int i = 0; i < 6; i++)
				if (s.indices[i] == 0)
					count[i]++;
		}
		for (int i = 0; i < 6; i++)
			chi += (count[i] - 1000.0) * (count[i] - 1000.0) / 1000.0;
		WT_CHECK(chi < 20.5);
		weft_sampler_free(&s);
	}

	WT_FAILS(weft_sampler_init(&s, 10, 3, 3, 0, 0, 0), WEFT_ERR_INVALID_ARG, "rank 3");
	WT_FAILS(weft_sampler_init(&s, 2, 4, 0, 0, 0, 1), WEFT_ERR_INVALID_ARG,
		 "2 examples over 4 ranks", "drop_last");
	return wt_done("test_data_sampler");
}
