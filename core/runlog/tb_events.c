/* TensorBoard events: TFRecord framing, and Event/Summary protobufs encoded
 * and decoded by hand (varints and length-delimited fields). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/file.h"
#include "runlog/tb_events.h"

/* ---- CRC-32C --------------------------------------------------------- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[i] = c;
	}
}

uint32_t weft_crc32c(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;

	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

uint32_t weft_crc32c_mask(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* ---- protobuf encoding ------------------------------------------------ */

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

static size_t put_varint(uint8_t *o, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		o[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	o[n++] = (uint8_t)v;
	return n;
}

static size_t put_key(uint8_t *o, unsigned field, unsigned wire)
{
	return put_varint(o, (uint64_t)field << 3 | wire);
}

static size_t put_le(uint8_t *o, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		o[i] = (uint8_t)(v >> (8 * i));
	return (size_t)bytes;
}

static size_t put_double(uint8_t *o, unsigned field, double d)
{
	uint64_t bits;
	size_t n = put_key(o, field, WIRE_I64);

	memcpy(&bits, &d, sizeof(bits));
	return n + put_le(o + n, bits, 8);
}

static size_t put_bytes(uint8_t *o, unsigned field, const void *data, size_t len)
{
	size_t n = put_key(o, field, WIRE_LEN);

	n += put_varint(o + n, len);
	memcpy(o + n, data, len);
	return n + len;
}

/* ---- writer ----------------------------------------------------------- */

struct weft_tb_writer {
	FILE *f;
	char path[4096];
};

static double now_seconds(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

static weft_status write_record(weft_tb_writer *w, const uint8_t *data, size_t len)
{
	uint8_t head[12], tail[4];

	put_le(head, len, 8);
	put_le(head + 8, weft_crc32c_mask(weft_crc32c(0, head, 8)), 4);
	put_le(tail, weft_crc32c_mask(weft_crc32c(0, data, len)), 4);
	if (fwrite(head, 1, sizeof(head), w->f) != sizeof(head) ||
	    fwrite(data, 1, len, w->f) != len || fwrite(tail, 1, sizeof(tail), w->f) != sizeof(tail))
		return weft_error_set(WEFT_ERR_IO, "cannot write TensorBoard events to '%s': %s",
				      w->path, strerror(errno));
	return WEFT_OK;
}

weft_status weft_tb_writer_open(const char *dir, weft_tb_writer **out)
{
	static const char version[] = "brain.Event:2";
	weft_tb_writer *w;
	char host[256] = "localhost";
	uint8_t rec[64];
	size_t n = 0;
	double t = now_seconds();
	weft_status st;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory opening a TensorBoard writer");
	if (gethostname(host, sizeof(host) - 1) != 0)
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = '\0';
	snprintf(w->path, sizeof(w->path), "%s/events.out.tfevents.%010lld.%s.%ld.0", dir,
		 (long long)t, host, (long)getpid());
	w->f = fopen(w->path, "wb");
	if (!w->f) {
		st = weft_error_set(WEFT_ERR_IO, "cannot create TensorBoard events file '%s': %s",
				    w->path, strerror(errno));
		goto out_free;
	}
	n += put_double(rec + n, 1, t);
	n += put_bytes(rec + n, 3, version, sizeof(version) - 1);
	st = write_record(w, rec, n);
	if (st)
		goto out_close;
	*out = w;
	return WEFT_OK;
out_close:
	fclose(w->f);
out_free:
	free(w);
	return st;
}

const char *weft_tb_writer_path(const weft_tb_writer *w)
{
	return w->path;
}

weft_status weft_tb_add_scalar(weft_tb_writer *w, const char *tag, int64_t step, float value,
			       double wall_time)
{
	/* Value <= 2 + 2 + 255 + 5 bytes; Summary and Event add a few more. */
	uint8_t val[WEFT_TB_MAX_TAG + 16], sum[WEFT_TB_MAX_TAG + 32], rec[WEFT_TB_MAX_TAG + 64];
	size_t tl = tag ? strlen(tag) : 0, nv = 0, ns, nr = 0;
	uint32_t bits;

	if (tl == 0 || tl >= WEFT_TB_MAX_TAG)
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "TensorBoard tag must be 1 to %d bytes, got %zu ('%.40s')",
				      WEFT_TB_MAX_TAG - 1, tl, tag ? tag : "(null)");
	nv += put_bytes(val + nv, 1, tag, tl);
	nv += put_key(val + nv, 2, WIRE_I32);
	memcpy(&bits, &value, sizeof(bits));
	nv += put_le(val + nv, bits, 4);
	ns = put_bytes(sum, 1, val, nv);
	nr += put_double(rec + nr, 1, wall_time > 0 ? wall_time : now_seconds());
	nr += put_key(rec + nr, 2, WIRE_VARINT);
	nr += put_varint(rec + nr, (uint64_t)step);
	nr += put_bytes(rec + nr, 5, sum, ns);
	return write_record(w, rec, nr);
}

weft_status weft_tb_flush(weft_tb_writer *w)
{
	if (fflush(w->f) != 0)
		return weft_error_set(WEFT_ERR_IO, "cannot flush '%s': %s", w->path,
				      strerror(errno));
	return WEFT_OK;
}

weft_status weft_tb_writer_close(weft_tb_writer *w)
{
	weft_status st = WEFT_OK;
	int bad;

	if (!w)
		return WEFT_OK;
	bad = ferror(w->f);
	bad |= fclose(w->f) != 0;
	if (bad)
		st = weft_error_set(WEFT_ERR_IO, "cannot finish writing '%s'", w->path);
	free(w);
	return st;
}

/* ---- reader ------------------------------------------------------------ */

typedef struct pb {
	const uint8_t *p, *end;
} pb;

static int get_varint(pb *b, uint64_t *v)
{
	uint64_t r = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		uint8_t c;

		if (b->p >= b->end)
			return 0;
		c = *b->p++;
		r |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = r;
			return 1;
		}
	}
	return 0;
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Reads one field's key and payload; for WIRE_LEN, *sub is the payload. */
static const char *next_field(pb *b, unsigned *field, unsigned *wire, uint64_t *num, pb *sub)
{
	uint64_t key, len;

	if (!get_varint(b, &key))
		return "bad field key";
	*field = (unsigned)(key >> 3);
	*wire = (unsigned)(key & 7);
	switch (*wire) {
	case WIRE_VARINT:
		if (!get_varint(b, num))
			return "bad varint";
		return NULL;
	case WIRE_I64:
		if (b->end - b->p < 8)
			return "truncated 64-bit field";
		*num = get_le(b->p, 8);
		b->p += 8;
		return NULL;
	case WIRE_I32:
		if (b->end - b->p < 4)
			return "truncated 32-bit field";
		*num = get_le(b->p, 4);
		b->p += 4;
		return NULL;
	case WIRE_LEN:
		if (!get_varint(b, &len) || len > (uint64_t)(b->end - b->p))
			return "length-delimited field runs past its message";
		sub->p = b->p;
		sub->end = b->p + len;
		b->p += len;
		return NULL;
	default:
		return "unsupported wire type";
	}
}

static const char *decode_value(pb b, weft_tb_event *ev)
{
	while (b.p < b.end) {
		unsigned field, wire;
		uint64_t num = 0;
		pb sub = { 0 };
		const char *err = next_field(&b, &field, &wire, &num, &sub);

		if (err)
			return err;
		if (field == 1 && wire == WIRE_LEN) {
			size_t n = (size_t)(sub.end - sub.p);

			if (n >= sizeof(ev->tag))
				return "tag longer than 255 bytes";
			memcpy(ev->tag, sub.p, n);
			ev->tag[n] = '\0';
		} else if (field == 2 && wire == WIRE_I32) {
			uint32_t bits = (uint32_t)num;

			memcpy(&ev->simple_value, &bits, sizeof(bits));
			ev->has_simple_value = 1;
		}
	}
	return NULL;
}

static weft_status decode_event(const char *path, int64_t rec, long off, const uint8_t *data,
				size_t len, weft_tb_event_fn fn, void *ctx, int *stop)
{
	weft_tb_event ev = { .record = rec };
	pb b = { data, data + len }, summary = { 0 };
	const char *err = NULL;
	int has_summary = 0;

	while (!err && b.p < b.end) {
		unsigned field, wire;
		uint64_t num = 0;
		pb sub = { 0 };

		err = next_field(&b, &field, &wire, &num, &sub);
		if (err)
			break;
		if (field == 1 && wire == WIRE_I64) {
			memcpy(&ev.wall_time, &num, sizeof(num));
		} else if (field == 2 && wire == WIRE_VARINT) {
			ev.step = (int64_t)num;
		} else if (field == 3 && wire == WIRE_LEN) {
			size_t n = (size_t)(sub.end - sub.p);

			if (n >= sizeof(ev.file_version))
				n = sizeof(ev.file_version) - 1;
			memcpy(ev.file_version, sub.p, n);
			ev.file_version[n] = '\0';
		} else if (field == 5 && wire == WIRE_LEN) {
			summary = sub;
			has_summary = 1;
		}
	}
	if (!err && has_summary) {
		int any = 0;

		while (!err && summary.p < summary.end && !*stop) {
			unsigned field, wire;
			uint64_t num = 0;
			pb sub = { 0 };

			err = next_field(&summary, &field, &wire, &num, &sub);
			if (err || field != 1 || wire != WIRE_LEN)
				continue;
			weft_tb_event one = ev;

			one.has_value = 1;
			err = decode_value(sub, &one);
			if (!err) {
				any = 1;
				*stop = fn(ctx, &one);
			}
		}
		if (!err && !any)
			*stop = fn(ctx, &ev);
	} else if (!err) {
		*stop = fn(ctx, &ev);
	}
	if (err)
		return weft_error_set(WEFT_ERR_CORRUPT,
				      "TensorBoard file '%s': record %" PRId64 " at byte %ld: %s",
				      path, rec, off, err);
	return WEFT_OK;
}

weft_status weft_tb_read_file(const char *path, weft_tb_event_fn fn, void *ctx)
{
	weft_status st = WEFT_OK;
	uint8_t *data = NULL;
	size_t cap = 0;
	int64_t rec = 0;
	int stop = 0;
	FILE *f;

	st = weft_file_fopen_read(path, "TensorBoard file", &f, NULL);
	if (st)
		return st;
	while (!stop) {
		uint8_t head[12], tail[4];
		long off = ftell(f);
		size_t got = fread(head, 1, sizeof(head), f);
		uint64_t len;

		if (got == 0 && feof(f))
			break;
		if (got != sizeof(head)) {
			st = weft_error_set(WEFT_ERR_CORRUPT,
					    "TensorBoard file '%s': record %" PRId64
					    " at byte %ld: truncated header (%zu of 12 bytes)",
					    path, rec, off, got);
			goto out;
		}
		len = get_le(head, 8);
		if ((uint32_t)get_le(head + 8, 4) != weft_crc32c_mask(weft_crc32c(0, head, 8))) {
			st = weft_error_set(WEFT_ERR_CORRUPT,
					    "TensorBoard file '%s': record %" PRId64
					    " at byte %ld: length CRC mismatch", path, rec, off);
			goto out;
		}
		if (len > (1u << 30)) {
			st = weft_error_set(WEFT_ERR_CORRUPT,
					    "TensorBoard file '%s': record %" PRId64
					    " at byte %ld: implausible length %" PRIu64, path, rec,
					    off, len);
			goto out;
		}
		if (len > cap) {
			uint8_t *nd = realloc(data, (size_t)len);

			if (!nd) {
				st = weft_error_set(WEFT_ERR_NOMEM, "out of memory reading '%s'", path);
				goto out;
			}
			data = nd;
			cap = (size_t)len;
		}
		if (fread(data, 1, (size_t)len, f) != len || fread(tail, 1, 4, f) != 4) {
			st = weft_error_set(WEFT_ERR_CORRUPT,
					    "TensorBoard file '%s': record %" PRId64
					    " at byte %ld: truncated (the file ends inside it)",
					    path, rec, off);
			goto out;
		}
		if ((uint32_t)get_le(tail, 4) != weft_crc32c_mask(weft_crc32c(0, data, (size_t)len))) {
			st = weft_error_set(WEFT_ERR_CORRUPT,
					    "TensorBoard file '%s': record %" PRId64
					    " at byte %ld: data CRC mismatch", path, rec, off);
			goto out;
		}
		st = decode_event(path, rec, off, data, (size_t)len, fn, ctx, &stop);
		if (st)
			goto out;
		rec++;
	}
out:
	free(data);
	fclose(f);
	return st;
}
