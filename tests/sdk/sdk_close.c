/* sdk_close: compares the float32 weights of two model.safetensors files,
 * for the SDK install test (install_test.sh).
 *
 *   sdk_close compare A B TOL  prints "max_abs_diff D over N elements";
 *                              exit 0 when D <= TOL, 1 when larger, 2 on
 *                              error (unreadable, or the two files do not
 *                              hold the same tensors: headers differ)
 *   sdk_close numel A          prints the number of float32 elements
 *
 * Both files must come from the same model, so their JSON headers (names,
 * dtypes, shapes, offsets) are byte-identical and the data sections can be
 * compared element by element. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct st_file {
	unsigned char *bytes;
	size_t len;
	size_t header_len;  /* JSON bytes after the 8-byte length */
	const float *data;  /* after the header (memcpy'd out: may be unaligned) */
	size_t numel;
} st_file;

static int load(const char *path, st_file *f)
{
	FILE *fp = fopen(path, "rb");
	uint64_t n = 0;
	long end;

	memset(f, 0, sizeof(*f));
	if (!fp) {
		fprintf(stderr, "sdk_close: cannot open %s\n", path);
		return -1;
	}
	if (fseek(fp, 0, SEEK_END) != 0 || (end = ftell(fp)) < 8 || fseek(fp, 0, SEEK_SET) != 0)
		goto out_bad;
	f->len = (size_t)end;
	f->bytes = malloc(f->len);
	if (!f->bytes || fread(f->bytes, 1, f->len, fp) != f->len)
		goto out_bad;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | f->bytes[i];
	if (n > f->len - 8 || (f->len - 8 - n) % 4)
		goto out_bad;
	f->header_len = (size_t)n;
	f->numel = (f->len - 8 - n) / 4;
	fclose(fp);
	return 0;

out_bad:
	fprintf(stderr, "sdk_close: %s is not a float32 safetensors file\n", path);
	fclose(fp);
	free(f->bytes);
	f->bytes = NULL;
	return -1;
}

static float at(const st_file *f, size_t i)
{
	float v;

	memcpy(&v, f->bytes + 8 + f->header_len + 4 * i, sizeof(v));
	return v;
}

int main(int argc, char **argv)
{
	st_file a, b;
	double tol, worst = 0.0;
	int rc = 2;

	if (argc == 3 && !strcmp(argv[1], "numel")) {
		if (load(argv[2], &a))
			return 2;
		printf("%zu\n", a.numel);
		free(a.bytes);
		return 0;
	}
	if (argc != 5 || strcmp(argv[1], "compare")) {
		fprintf(stderr, "usage: sdk_close compare A B TOL | sdk_close numel A\n");
		return 2;
	}
	tol = strtod(argv[4], NULL);
	if (load(argv[2], &a))
		return 2;
	if (load(argv[3], &b))
		goto out_free_a;
	if (a.header_len != b.header_len || memcmp(a.bytes, b.bytes, 8 + a.header_len) ||
	    a.numel != b.numel) {
		fprintf(stderr, "sdk_close: %s and %s hold different tensors (headers differ)\n",
			argv[2], argv[3]);
		goto out_free_b;
	}
	for (size_t i = 0; i < a.numel; i++) {
		double d = fabs((double)at(&a, i) - (double)at(&b, i));

		if (!(d <= worst)) /* NaN counts as the worst */
			worst = isnan(d) ? INFINITY : d;
	}
	printf("max_abs_diff %.9g over %zu elements\n", worst, a.numel);
	rc = worst <= tol ? 0 : 1;
out_free_b:
	free(b.bytes);
out_free_a:
	free(a.bytes);
	return rc;
}
