/* .npy: versions 1, 2 and 3, every supported dtype, C order; Fortran
 * order, big-endian, bad magic, truncation and mismatched labels refused
 * with the reason and the fix. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"
#include "weft_test.h"

/* Writes an npy file: header dict padded so data starts at a multiple of
 * 64, as numpy does. */
static void write_npy(const char *path, int version, const char *descr, int fortran,
		      const char *shape, const void *data, size_t len)
{
	char dict[256];
	int pre = version == 1 ? 10 : 12;
	int dl = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }",
			  descr, fortran ? "True" : "False", shape);
	int total = ((pre + dl + 1 + 63) / 64) * 64, hl = total - pre;
	FILE *f = fopen(path, "wb");
	uint8_t head[12] = { 0x93, 'N', 'U', 'M', 'P', 'Y', (uint8_t)version, 0 };

	WT_REQUIRE(f);
	if (version == 1) {
		head[8] = (uint8_t)hl;
		head[9] = (uint8_t)(hl >> 8);
	} else {
		head[8] = (uint8_t)hl;
		head[9] = (uint8_t)(hl >> 8);
		head[10] = 0;
		head[11] = 0;
	}
	fwrite(head, 1, (size_t)pre, f);
	fwrite(dict, 1, (size_t)dl, f);
	for (int i = dl; i < hl - 1; i++)
		fputc(' ', f);
	fputc('\n', f);
	fwrite(data, 1, len, f);
	fclose(f);
}

int main(void)
{
	char px[64], py[64];
	float xf[6] = { 0.5f, -1.0f, 2.0f, 3.5f, 4.0f, -6.25f };
	double xd[6] = { 0.5, -1.0, 2.0, 3.5, 4.0, -6.25 };
	int64_t yl[2] = { 1, 4 };
	uint16_t yu[3] = { 3, 0, 1 };
	uint8_t xb[6] = { 0, 1, 2, 253, 254, 255 };
	weft_dataset ds;
	weft_npy a;

	snprintf(px, sizeof(px), "npy_x_%ld.npy", (long)getpid());
	snprintf(py, sizeof(py), "npy_y_%ld.npy", (long)getpid());

	write_npy(px, 1, "<f4", 0, "(2, 3)", xf, sizeof(xf));
	write_npy(py, 2, "<i8", 0, "(2,)", yl, sizeof(yl));
	WT_OK(weft_dataset_from_npy(px, py, &ds));
	WT_CHECK(ds.n == 2 && ds.ndim == 1 && ds.shape[0] == 3 && ds.num_classes == 5);
	WT_CHECK(ds.x[5] == -6.25f && ds.y[1] == 4);
	weft_dataset_free(&ds);

	write_npy(px, 3, "<f8", 0, "(2, 3)", xd, sizeof(xd));
	write_npy(py, 1, "<u2", 0, "(2,)", yu, 4);
	WT_OK(weft_dataset_from_npy(px, py, &ds));
	WT_CHECK(ds.x[3] == 3.5f && ds.y[0] == 3 && ds.num_classes == 4);
	weft_dataset_free(&ds);

	write_npy(px, 1, "|u1", 0, "(6,)", xb, sizeof(xb));
	WT_OK(weft_npy_read(px, &a));
	WT_CHECK(a.dtype == WEFT_NPY_U1 && a.ndim == 1 && a.count == 6 &&
		 ((uint8_t *)a.data)[5] == 255);
	weft_npy_free(&a);

	/* Refusals. */
	write_npy(px, 1, "<f4", 1, "(2, 3)", xf, sizeof(xf));
	WT_FAILS(weft_npy_read(px, &a), WEFT_ERR_UNSUPPORTED, px, "Fortran",
		 "np.ascontiguousarray");
	write_npy(px, 1, ">f4", 0, "(2, 3)", xf, sizeof(xf));
	WT_FAILS(weft_npy_read(px, &a), WEFT_ERR_UNSUPPORTED, "'>f4'", "astype");
	write_npy(px, 1, "<f4", 0, "(2, 4)", xf, sizeof(xf));
	WT_FAILS(weft_npy_read(px, &a), WEFT_ERR_CORRUPT, "truncated", "needs 32 bytes",
		 "holds 24");
	write_npy(px, 1, "<f4", 0, "(2, 3)", xf, sizeof(xf));
	write_npy(py, 1, "<f4", 0, "(2,)", xf, 8);
	WT_FAILS(weft_dataset_from_npy(px, py, &ds), WEFT_ERR_DTYPE, "floating point");
	write_npy(py, 1, "<u2", 0, "(3,)", yu, 6);
	WT_FAILS(weft_dataset_from_npy(px, py, &ds), WEFT_ERR_SHAPE, "3 entries", "2 examples");
	{
		FILE *f = fopen(px, "wb");

		fputs("PK\x03\x04 not numpy at all", f);
		fclose(f);
	}
	WT_FAILS(weft_npy_read(px, &a), WEFT_ERR_CORRUPT, "no \\x93NUMPY magic");
	WT_FAILS(weft_npy_read("no-such.npy", &a), WEFT_ERR_NOT_FOUND, "no-such.npy");
	remove(px);
	remove(py);
	return wt_done("test_data_npy");
}
