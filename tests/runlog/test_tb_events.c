/* TensorBoard events: CRC-32C against its check value, and a written file
 * parsed back record by record (both CRCs, every field); damaged files are
 * refused with the record and the failed check named.
 *
 * With an argument DIR the test leaves its file in DIR for the optional
 * cross-check against the tensorboard Python package (tb_crosscheck.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runlog/tb_events.h"
#include "weft_test.h"

#define N_SCALARS 100

typedef struct seen {
	int n;
	int versions;
	int64_t steps[N_SCALARS + 2];
	float values[N_SCALARS + 2];
	char tags[N_SCALARS + 2][32];
	double wall[N_SCALARS + 2];
} seen;

static int collect(void *ctx, const weft_tb_event *ev)
{
	seen *s = ctx;

	if (ev->file_version[0]) {
		WT_CHECK(strcmp(ev->file_version, "brain.Event:2") == 0);
		WT_CHECK(ev->record == 0 && !ev->has_value);
		s->versions++;
		return 0;
	}
	WT_REQUIRE(s->n < N_SCALARS + 2);
	WT_CHECK(ev->has_value && ev->has_simple_value);
	s->steps[s->n] = ev->step;
	s->values[s->n] = ev->simple_value;
	s->wall[s->n] = ev->wall_time;
	snprintf(s->tags[s->n], sizeof(s->tags[0]), "%s", ev->tag);
	s->n++;
	return 0;
}

static long file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static void flip_byte(const char *path, long off)
{
	FILE *f = fopen(path, "r+b");
	int c;

	WT_REQUIRE(f);
	fseek(f, off, SEEK_SET);
	c = fgetc(f);
	fseek(f, off, SEEK_SET);
	fputc(c ^ 0x40, f);
	fclose(f);
}

static void copy_prefix(const char *from, const char *to, long n)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	char *buf = malloc((size_t)n);

	WT_REQUIRE(a && b && buf);
	WT_REQUIRE(fread(buf, 1, (size_t)n, a) == (size_t)n);
	fwrite(buf, 1, (size_t)n, b);
	fclose(a);
	fclose(b);
	free(buf);
}

int main(int argc, char **argv)
{
	char dir[128], path[4096], bad[4200];
	weft_tb_writer *w = NULL;
	seen s = { 0 };
	long size;

	/* The CRC-32C check value (RFC 3720, B.4): "123456789" -> e3069283. */
	WT_CHECK(weft_crc32c(0, "123456789", 9) == 0xe3069283u);
	/* Streaming equals one-shot. */
	WT_CHECK(weft_crc32c(weft_crc32c(0, "1234", 4), "56789", 5) == 0xe3069283u);
	/* 32 zero bytes (RFC 3720, B.4): 8a9136aa. */
	{
		uint8_t z[32] = { 0 };

		WT_CHECK(weft_crc32c(0, z, 32) == 0x8a9136aau);
	}

	if (argc > 1)
		snprintf(dir, sizeof(dir), "%s", argv[1]);
	else
		snprintf(dir, sizeof(dir), "tb_test_%ld", (long)getpid());
	mkdir(dir, 0777);
	WT_OK(weft_tb_writer_open(dir, &w));
	snprintf(path, sizeof(path), "%s", weft_tb_writer_path(w));
	WT_CHECK(strstr(path, "/events.out.tfevents.") != NULL);
	for (int i = 0; i < N_SCALARS; i++) {
		/* Steps span one- to five-byte varints; values include negatives. */
		int64_t step = (int64_t)i * i * i * 1000;

		WT_OK(weft_tb_add_scalar(w, i % 2 ? "train/loss" : "val/acc", step,
					 (float)(i - 50) * 0.25f, 1700000000.5 + i));
	}
	WT_FAILS(weft_tb_add_scalar(w, "", 0, 1.0f, 0), WEFT_ERR_INVALID_ARG, "tag must be");
	WT_OK(weft_tb_writer_close(w));

	WT_OK(weft_tb_read_file(path, collect, &s));
	WT_CHECK(s.versions == 1);
	WT_CHECK(s.n == N_SCALARS);
	for (int i = 0; i < N_SCALARS && i < s.n; i++) {
		WT_CHECK(s.steps[i] == (int64_t)i * i * i * 1000);
		/* Floats go through the file bit for bit: exact comparison. */
		WT_CHECK(s.values[i] == (float)(i - 50) * 0.25f);
		WT_CHECK(strcmp(s.tags[i], i % 2 ? "train/loss" : "val/acc") == 0);
		WT_CHECK(s.wall[i] == 1700000000.5 + i);
	}
	if (argc > 1)
		return wt_done("test_tb_events");

	/* Damage: a flipped byte in the first record's data, in the second
	 * record's length, and a file cut in the middle of the last record. */
	size = file_size(path);
	WT_REQUIRE(size > 100);
	snprintf(bad, sizeof(bad), "%s/bad_data", dir);
	copy_prefix(path, bad, size);
	flip_byte(bad, 14);
	WT_FAILS(weft_tb_read_file(bad, collect, &(seen){ 0 }), WEFT_ERR_CORRUPT, bad,
		 "record 0", "data CRC mismatch");
	{
		/* Record 0 is 12 + len + 4 bytes; its length is the first 8 bytes. */
		FILE *f = fopen(path, "rb");
		uint8_t head[8];
		long rec1;

		WT_REQUIRE(f && fread(head, 1, 8, f) == 8);
		fclose(f);
		rec1 = 12 + head[0] + 4;
		copy_prefix(path, bad, size);
		flip_byte(bad, rec1 + 1);
		WT_FAILS(weft_tb_read_file(bad, collect, &(seen){ 0 }), WEFT_ERR_CORRUPT,
			 "record 1", "length CRC mismatch");
	}
	copy_prefix(path, bad, size - 3);
	WT_FAILS(weft_tb_read_file(bad, collect, &(seen){ 0 }), WEFT_ERR_CORRUPT, "truncated");
	remove(bad);
	WT_FAILS(weft_tb_read_file(bad, collect, &s), WEFT_ERR_NOT_FOUND, bad);
	WT_FAILS(weft_tb_writer_open("/nonexistent-dir-for-weft", &w), WEFT_ERR_IO,
		 "/nonexistent-dir-for-weft/events.out.tfevents.");
	remove(path);
	rmdir(dir);
	return wt_done("test_tb_events");
}
