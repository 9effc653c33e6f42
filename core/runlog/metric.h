/* runlog/metric.h - a named value, the unit every run logger takes. */
#ifndef WEFT_RUNLOG_METRIC_H
#define WEFT_RUNLOG_METRIC_H

/* A metric for one row or line: `name` is borrowed for the call. */
typedef struct weft_metric {
	const char *name;
	double value;
} weft_metric;

#endif /* WEFT_RUNLOG_METRIC_H */
