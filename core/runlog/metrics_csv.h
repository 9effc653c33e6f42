/* runlog/metrics_csv.h - metrics.csv, as Lightning's CSVLogger writes it.
 *
 * One row per logged step: a "step" column, then one column per metric in
 * the order metrics were first seen; a metric absent from a row is an empty
 * cell. When a row brings a new metric (validation metrics appear after
 * the first epoch), the whole file is rewritten with the wider header,
 * through a temporary file and a rename, so the file is always a valid CSV.
 * Keys are quoted per RFC 4180 when they hold a comma, quote or newline.
 */
#ifndef WEFT_RUNLOG_METRICS_CSV_H
#define WEFT_RUNLOG_METRICS_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "runlog/metric.h"
#include "weft/status.h"

typedef struct weft_csv_logger weft_csv_logger;

/* Creates (truncates) the CSV at `path`. Free with weft_csv_logger_close.
 * Errors: WEFT_ERR_IO naming the path. */
weft_status weft_csv_logger_open(const char *path, weft_csv_logger **out);

/* Appends a row for `step` with n metrics (names copied). The row is kept
 * in memory too (16 bytes per cell) so a new column can rewrite the file.
 * Errors: WEFT_ERR_INVALID_ARG for an empty name, "step", or a name
 * repeated in the row; WEFT_ERR_IO naming the path; WEFT_ERR_NOMEM. */
weft_status weft_csv_log(weft_csv_logger *l, int64_t step, const weft_metric *m, size_t n);

/* Pushes buffered rows to the file. */
weft_status weft_csv_flush(weft_csv_logger *l);

/* Flushes, closes and frees; NULL is ignored. */
weft_status weft_csv_logger_close(weft_csv_logger *l);

#endif /* WEFT_RUNLOG_METRICS_CSV_H */
