/* idx files, plain and gzip: read back exactly; every kind of damage named;
 * Fashion-MNIST from its Debian package (the real files) when installed,
 * and the missing-package message otherwise. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "data/dataset.h"
#include "weft/memory.h"
#include "weft_test.h"

/* An idx file of n 3x4 images (or n labels when labels) holding i*7+j. */
static size_t make_idx(uint8_t *buf, int n, int labels, uint8_t type)
{
	size_t o = 0;
	int ndim = labels ? 1 : 3;
	uint32_t dims[3] = { (uint32_t)n, 3, 4 };

	buf[o++] = 0;
	buf[o++] = 0;
	buf[o++] = type;
	buf[o++] = (uint8_t)ndim;
	for (int d = 0; d < ndim; d++) {
		buf[o++] = (uint8_t)(dims[d] >> 24);
		buf[o++] = (uint8_t)(dims[d] >> 16);
		buf[o++] = (uint8_t)(dims[d] >> 8);
		buf[o++] = (uint8_t)dims[d];
	}
	for (int i = 0; i < (labels ? n : n * 12); i++)
		buf[o++] = labels ? (uint8_t)(i % 5) : (uint8_t)(i * 7);
	return o;
}

static void put_file(const char *path, const void *data, size_t len, int gz)
{
	if (gz) {
		gzFile g = gzopen(path, "wb");

		WT_REQUIRE(g && gzwrite(g, data, (unsigned)len) == (int)len);
		gzclose(g);
	} else {
		FILE *f = fopen(path, "wb");

		WT_REQUIRE(f && fwrite(data, 1, len, f) == len);
		fclose(f);
	}
}

static long fsize(const char *p)
{
	struct stat sb;

	return stat(p, &sb) == 0 ? (long)sb.st_size : -1;
}

int main(void)
{
	uint8_t buf[4096];
	char im[64], lb[64], bad[64];
	weft_idx idx;
	weft_dataset ds;
	weft_mem_stats before, after;
	long pid = (long)getpid();
	size_t n;

	snprintf(im, sizeof(im), "idx_im_%ld.gz", pid);
	snprintf(lb, sizeof(lb), "idx_lb_%ld", pid);
	snprintf(bad, sizeof(bad), "idx_bad_%ld", pid);
	weft_mem_get_stats(&before);

	/* Compressed images, plain labels: both read through zlib. */
	n = make_idx(buf, 20, 0, 0x08);
	put_file(im, buf, n, 1);
	n = make_idx(buf, 20, 1, 0x08);
	put_file(lb, buf, n, 0);
	WT_OK(weft_idx_read(im, &idx));
	WT_CHECK(idx.ndim == 3 && idx.dims[0] == 20 && idx.dims[1] == 3 && idx.dims[2] == 4);
	WT_CHECK(idx.count == 240 && idx.data[239] == (uint8_t)(239 * 7));
	weft_idx_free(&idx);
	WT_OK(weft_dataset_from_idx(im, lb, &ds));
	WT_CHECK(ds.n == 20 && ds.ndim == 2 && ds.shape[0] == 3 && ds.shape[1] == 4);
	WT_CHECK(ds.example_numel == 12 && ds.num_classes == 5);
	/* u8 -> f32 / 255: exact to float rounding (one ulp of 1.0). */
	WT_CLOSE(ds.x[13], (double)(uint8_t)(13 * 7) / 255.0, 0, 1.2e-7);
	WT_CHECK(ds.y[7] == 2);
	{
		weft_dataset tail;

		WT_OK(weft_dataset_split_tail(&ds, 5, &tail));
		WT_CHECK(ds.n == 15 && tail.n == 5 && tail.y[0] == 15 % 5);
		WT_CLOSE(tail.x[0], (double)(uint8_t)(15 * 12 * 7) / 255.0, 0, 1.2e-7);
		WT_FAILS(weft_dataset_split_tail(&ds, 15, &tail), WEFT_ERR_INVALID_ARG, "1 to n - 1");
		weft_dataset_free(&tail);
	}
	WT_OK(weft_dataset_normalize(&ds, 0.5, 0.25));
	WT_CLOSE(ds.x[13], ((double)(uint8_t)(13 * 7) / 255.0 - 0.5) / 0.25, 0, 1e-6);
	weft_dataset_free(&ds);

	/* Damage, each named. */
	WT_FAILS(weft_idx_read("no-such-file.idx", &idx), WEFT_ERR_NOT_FOUND, "no-such-file.idx");
	n = make_idx(buf, 20, 0, 0x08);
	put_file(bad, buf, n - 10, 0);
	WT_FAILS(weft_idx_read(bad, &idx), WEFT_ERR_CORRUPT, bad, "truncated",
		 "expected 240 bytes", "found 230");
	put_file(bad, buf, n - 10, 1);
	WT_FAILS(weft_idx_read(bad, &idx), WEFT_ERR_CORRUPT, bad, "truncated", "found 230");
	buf[n] = 1;
	put_file(bad, buf, n + 1, 0);
	WT_FAILS(weft_idx_read(bad, &idx), WEFT_ERR_CORRUPT, "trailing bytes");
	put_file(bad, buf, n + 1, 1);
	WT_FAILS(weft_idx_read(bad, &idx), WEFT_ERR_CORRUPT, "trailing bytes");
	buf[0] = 0x1f;
	put_file(bad, buf, n, 0);
	WT_FAILS(weft_idx_read(bad, &idx), WEFT_ERR_CORRUPT, "not an idx file");
	n = make_idx(buf, 20, 0, 0x0D);
	put_file(bad, buf, n, 0);
	WT_FAILS(weft_idx_read(bad, &idx), WEFT_ERR_UNSUPPORTED, "0x0d (float)");
	/* A gzip stream cut in the middle (compressed bytes lost). */
	n = make_idx(buf, 200, 0, 0x08);
	put_file(bad, buf, n, 1);
	WT_CHECK(truncate(bad, fsize(bad) / 2) == 0);
	WT_FAILS(weft_idx_read(bad, &idx), WEFT_ERR_CORRUPT, bad);
	/* Labels that do not pair with the images. */
	n = make_idx(buf, 19, 1, 0x08);
	put_file(lb, buf, n, 0);
	WT_FAILS(weft_dataset_from_idx(im, lb, &ds), WEFT_ERR_SHAPE, "19 entries", "20 examples");
	remove(im);
	remove(lb);
	remove(bad);

	/* Everything freed: the accounted bytes are back where they were. */
	weft_mem_get_stats(&after);
	WT_CHECK(after.current[WEFT_MEM_OTHER] == before.current[WEFT_MEM_OTHER]);

	/* Fashion-MNIST: a directory without it names the package. */
	WT_FAILS(weft_fashion_mnist_load("/nonexistent-fmnist", "train", &ds), WEFT_ERR_NOT_FOUND,
		 "/nonexistent-fmnist/train-images-idx3-ubyte.gz",
		 "apt-get install dataset-fashion-mnist");
	WT_FAILS(weft_fashion_mnist_load(NULL, "valid", &ds), WEFT_ERR_INVALID_ARG, "'valid'");
	if (fsize(WEFT_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz") < 0) {
		fprintf(stderr, "note: dataset-fashion-mnist not installed; real-file checks "
				"skipped\n");
		return wt_done("test_data_idx");
	}
	{
		struct timespec t0, t1;
		int64_t hist[10] = { 0 };
		double sum = 0, lo = 1, hi = 0;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		WT_OK(weft_fashion_mnist_load(NULL, "train", &ds));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		fprintf(stderr, "Fashion-MNIST train: %.3f s\n",
			(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
		WT_CHECK(ds.n == 60000 && ds.ndim == 2 && ds.shape[0] == 28 && ds.shape[1] == 28);
		WT_CHECK(ds.num_classes == 10);
		for (int64_t i = 0; i < ds.n; i++)
			hist[ds.y[i]]++;
		/* The training set has exactly 6000 images per class. */
		for (int c = 0; c < 10; c++)
			WT_CHECK(hist[c] == 6000);
		for (int64_t i = 0; i < ds.n * 784; i++) {
			sum += ds.x[i];
			lo = ds.x[i] < lo ? ds.x[i] : lo;
			hi = ds.x[i] > hi ? ds.x[i] : hi;
		}
		WT_CHECK(lo == 0.0 && hi == 1.0);
		/* The published pixel mean is 0.2860 (4 digits): +-0.0001. */
		WT_CLOSE(sum / (double)(ds.n * 784), 0.2860, 0, 1e-4);
		weft_dataset_free(&ds);
		WT_OK(weft_fashion_mnist_load(NULL, "test", &ds));
		WT_CHECK(ds.n == 10000 && ds.num_classes == 10);
		weft_dataset_free(&ds);
	}
	return wt_done("test_data_idx");
}
