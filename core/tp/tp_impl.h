/* Internals shared by core/tp's files: the group object. */
#ifndef WEFT_TP_IMPL_H
#define WEFT_TP_IMPL_H

#include "tp/tp.h"

/* How one parameter is split, and its full shape (shape[1] 0 for 1-D). */
struct tp_param {
	weft_tp_split split;
	int32_t grad_partial;    /* its gradient is a partial sum over the group */
	int32_t ndim;
	int64_t shape[2];
	int32_t nparts;          /* WEFT_TP_ROWS_PARTS: its packed parts */
	int64_t part_rows[WEFT_TP_MAX_PARTS];
	int32_t part_split[WEFT_TP_MAX_PARTS];
};

struct weft_tp_group {
	int32_t size, rank;
	uint32_t flags;
	const weft_params *owner;
	const weft_comm_ops *ops;
	weft_comm *comm;
	size_t nparams;
	struct tp_param *p;      /* nparams entries */
	weft_tp_stats stats;
};

#endif /* WEFT_TP_IMPL_H */
