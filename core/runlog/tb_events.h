/* runlog/tb_events.h - TensorBoard event files, written natively.
 *
 * An events file is a sequence of TFRecords:
 *   uint64 length (little-endian), uint32 masked crc32c(length bytes),
 *   length bytes of data, uint32 masked crc32c(data)
 * where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. Each record's
 * data is a serialized tensorflow.Event protobuf, encoded here by hand:
 *   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
 *             Summary summary = 5; }
 *   Summary { repeated Value value = 1; }
 *   Value   { string tag = 1; float simple_value = 2; }
 * The first record carries file_version "brain.Event:2", as TensorFlow and
 * PyTorch's SummaryWriter write it. The reader exists so the format can be
 * tested by parsing it back (both CRCs and every field).
 */
#ifndef WEFT_RUNLOG_TB_EVENTS_H
#define WEFT_RUNLOG_TB_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "weft/status.h"

#define WEFT_TB_MAX_TAG 256 /* tags are at most 255 bytes */

/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78) of a buffer,
 * continuing from `crc` (0 to start). */
uint32_t weft_crc32c(uint32_t crc, const void *data, size_t len);

/* TFRecord's masking of a CRC. */
uint32_t weft_crc32c_mask(uint32_t crc);

typedef struct weft_tb_writer weft_tb_writer;

/* Creates `dir`/events.out.tfevents.<unix seconds>.<hostname>.<pid>.0 and
 * writes the file_version record. `dir` must exist. Free with
 * weft_tb_writer_close. Errors: WEFT_ERR_IO naming the file. */
weft_status weft_tb_writer_open(const char *dir, weft_tb_writer **out);

/* The file's path; borrowed, valid until close. */
const char *weft_tb_writer_path(const weft_tb_writer *w);

/* Appends one scalar event. wall_time is seconds since the epoch (pass a
 * value <= 0 for "now"). Does not allocate; buffered (see flush).
 * Errors: WEFT_ERR_INVALID_ARG for an empty tag or one longer than 255
 * bytes; WEFT_ERR_IO naming the file. */
weft_status weft_tb_add_scalar(weft_tb_writer *w, const char *tag, int64_t step, float value,
			       double wall_time);

/* Pushes buffered records to the file (fflush; no fsync). */
weft_status weft_tb_flush(weft_tb_writer *w);

/* Flushes, closes and frees. NULL is ignored (returns WEFT_OK). Errors:
 * WEFT_ERR_IO if the last writes failed; the writer is freed anyway. */
weft_status weft_tb_writer_close(weft_tb_writer *w);

/* One decoded event (one call per summary value; an event without values,
 * such as the file_version record, gives one call with has_value = 0). */
typedef struct weft_tb_event {
	int64_t record;          /* 0-based record index in the file */
	double wall_time;
	int64_t step;
	char file_version[64];   /* "" when absent */
	int has_value;
	char tag[WEFT_TB_MAX_TAG];
	float simple_value;
	int has_simple_value;
} weft_tb_event;

/* Return non-zero from the callback to stop reading early. */
typedef int (*weft_tb_event_fn)(void *ctx, const weft_tb_event *ev);

/* Reads an events file, checking both CRCs of every record and decoding
 * each Event. Errors: WEFT_ERR_NOT_FOUND / WEFT_ERR_IO naming the path;
 * WEFT_ERR_CORRUPT naming the path, the record index and byte offset and
 * what failed ("length CRC", "data CRC", "truncated", a protobuf fault). */
weft_status weft_tb_read_file(const char *path, weft_tb_event_fn fn, void *ctx);

#endif /* WEFT_RUNLOG_TB_EVENTS_H */
