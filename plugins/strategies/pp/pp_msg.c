/* Activations and gradients between neighbouring stages.
 *
 * Sends never block: the data is copied into a buffer of the pool and sent
 * asynchronously; the buffer returns to the pool once the send finished.
 * Receives are matched by content, not by arrival: a peer's messages to
 * this rank are posted in the order that peer sends them (known from its
 * schedule, a pure function), so that with p = 2 and interleaving, where
 * activations and gradients share one pair of ranks, the backend's
 * in-order matching per pair of ranks still pairs each message with its
 * receive. A receive posts the peer's messages up to the one wanted, then
 * waits for that one. Buffers come from a pool that grows during the first
 * step and is reused after (counted under WEFT_MEM_COMM). A send's buffer
 * returns to the pool only at the end of the step: the backend's `test`
 * reports a point-to-point transfer done once it is posted, and waiting
 * for its completion mid-step could wait on a peer that waits on us.
 * The buffers live on the model's device (the kernel table's mem_alloc),
 * and messages are copied in and out through its copy_ranges on the
 * stream of the micro-batch's context that wrote or reads them.
 *
 * One global order of the step's messages keeps rendezvous backends from
 * deadlocking. On NCCL a send completes only once its receive runs, and a
 * rank's sends and receives queue on one comm stream in issue order: with
 * 1f1b, stage 0 sending an activation while stage 1 sends a gradient,
 * each queued before the matching receive, waits forever. So the plan
 * numbers every message of the step by a deterministic simulation of all
 * ranks' schedules (weft_pp_message_order in weft/pp_schedule.h: sends
 * non-blocking, receives blocking; the ranks are advanced in turn, and a
 * send takes the next number), and each rank
 * issues its sends and receives in that order: before a send numbered k
 * it posts every receive numbered below k, and a receive posts the
 * receives numbered below it first. Then each comm stream's operations
 * are in increasing order, and the message with the lowest number not yet
 * done is at the head of both its ranks' streams once both issued it;
 * both do, since what a rank waits for before issuing it has a lower
 * number (its own earlier receives were sent before it in the
 * simulation). By induction every message completes, whatever the
 * schedule, p or v, with grouped calls or without. Posting a receive
 * early changes no data, so CPU results stay bit-identical. */
#include <string.h>

#include "pp.h"

struct pp_msg {
	int op;                 /* WEFT_PP_SEND_ACT / SEND_GRAD as the sender sees it */
	int micro, stage;       /* the sender's stage */
	int64_t idx;            /* its place in the step's global message order */
	float *buf;
	weft_comm_work *work;
	int posted, taken;
};

struct pp_chan {
	pp_msg *exp;            /* in the sender's order */
	int n, next_post;
};

static size_t buf_bytes(const pp_msgs *ms)
{
	return (size_t)ms->buf_numel * sizeof(float);
}

/* Copies n floats on ctx's stream (the kernel table of the context that
 * wrote or will read them). */
static weft_status msg_copy(weft_ctx *ctx, float *dst, const float *src, int64_t n)
{
	const weft_kernel_table *k = NULL;
	void *kctx = NULL;
	weft_copy_range r = { .dst = 0, .src = 0, .count = n };

	if (n <= 0)
		return WEFT_OK;
	g_host->ctx_kernels(ctx, &k, &kctx);
	return k->copy_ranges(kctx, sizeof(float), &r, 1, dst, src);
}

static weft_status get_buf(pp_msgs *ms, float **out)
{
	if (ms->n_free) {
		*out = ms->free_bufs[--ms->n_free];
		return WEFT_OK;
	}
	if (ms->n_bufs == ms->cap_free) {
		int cap = ms->cap_free ? 2 * ms->cap_free : 16;
		float **nb = g_host->mem_alloc(WEFT_MEM_OTHER, (size_t)cap * sizeof(float *));

		if (!nb)
			return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'pp': message pool");
		if (ms->free_bufs)
			memcpy(nb, ms->free_bufs, (size_t)ms->n_free * sizeof(float *));
		g_host->mem_free(ms->free_bufs);
		ms->free_bufs = nb;
		ms->cap_free = cap;
	}
	*out = NULL;
	if (ms->k->mem_alloc(ms->dev_index, WEFT_MEM_COMM, buf_bytes(ms), (void **)out))
		return g_host->error_wrap(WEFT_ERR_NOMEM, "strategy 'pp': message buffer of %lld "
					  "floats", (long long)ms->buf_numel);
	ms->n_bufs++;
	return WEFT_OK;
}

static void put_buf(pp_msgs *ms, float *b)
{
	ms->free_bufs[ms->n_free++] = b;
}

static weft_comm_buf cbuf(const pp_msgs *ms, void *data, int64_t n)
{
	return (weft_comm_buf){ .data = data, .count = n, .dtype = WEFT_COMM_F32,
				.device = (weft_comm_device)ms->g->device_type,
				.device_index = ms->g->device_index };
}

static void chans_free(pp_msgs *ms)
{
	if (!ms->from)
		return;
	for (int q = 0; q < ms->g->size; q++)
		g_host->mem_free(ms->from[q].exp);
	g_host->mem_free(ms->from);
	ms->from = NULL;
}

weft_status pp_msgs_plan(pp_msgs *ms, pp_group *g, weft_pp_kind kind, int m, int v,
			 int64_t buf_numel)
{
	size_t cap = weft_pp_max_actions(m, v), p = (size_t)g->size;
	size_t *n = NULL;
	weft_pp_action *a = NULL;
	int64_t *idx = NULL, *match = NULL;
	size_t *pos = NULL;
	char err[256];
	weft_status st = WEFT_OK;

	ms->g = g;
	if (buf_numel > ms->buf_numel) {
		/* every buffer is idle between steps: drop the small ones */
		for (int i = 0; i < ms->n_free; i++)
			ms->k->mem_free(ms->dev_index, WEFT_MEM_COMM, ms->free_bufs[i],
					buf_bytes(ms));
		ms->n_bufs -= ms->n_free;
		ms->n_free = 0;
		ms->buf_numel = buf_numel;
	}
	chans_free(ms);
	g_host->mem_free(ms->send_idx);
	ms->send_idx = NULL;
	ms->n_send_idx = ms->n_sent = 0;
	ms->from = g_host->mem_calloc(WEFT_MEM_OTHER, p * sizeof(pp_chan));
	n = g_host->mem_alloc(WEFT_MEM_OTHER, p * sizeof(*n));
	a = g_host->mem_alloc(WEFT_MEM_OTHER, p * cap * sizeof(*a));
	idx = g_host->mem_alloc(WEFT_MEM_OTHER, p * cap * sizeof(*idx));
	match = g_host->mem_alloc(WEFT_MEM_OTHER, p * cap * sizeof(*match));
	pos = g_host->mem_alloc(WEFT_MEM_OTHER, p * sizeof(*pos));
	ms->send_idx = g_host->mem_alloc(WEFT_MEM_OTHER, (cap + 1) * sizeof(int64_t));
	if (!ms->from || !n || !a || !idx || !match || !pos || !ms->send_idx) {
		st = g_host->error_set(WEFT_ERR_NOMEM, "strategy 'pp': message plan");
		goto out;
	}
	for (size_t q = 0; q < p; q++)
		if (weft_pp_schedule(kind, (int)q, g->size, m, v, a + q * cap, cap, &n[q], err,
				     sizeof(err))) {
			st = g_host->error_set(WEFT_ERR_CONFIG, "strategy 'pp': %s", err);
			goto out;
		}
	if (weft_pp_message_order(g->size, a, n, cap, idx, match, pos, err, sizeof(err)))
		st = g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'pp': %s", err);
	for (size_t q = 0; q < p && !st; q++) {
		pp_chan *c = &ms->from[q];
		const weft_pp_action *aq = a + q * cap;

		if ((int)q == g->rank) {
			for (size_t i = 0; i < n[q]; i++)
				if (aq[i].op == WEFT_PP_SEND_ACT || aq[i].op == WEFT_PP_SEND_GRAD)
					ms->send_idx[ms->n_send_idx++] = idx[q * cap + i];
			continue;
		}
		c->exp = g_host->mem_calloc(WEFT_MEM_OTHER, (n[q] + 1) * sizeof(pp_msg));
		if (!c->exp) {
			st = g_host->error_set(WEFT_ERR_NOMEM, "strategy 'pp': message plan");
			break;
		}
		for (size_t i = 0; i < n[q]; i++)
			if ((aq[i].op == WEFT_PP_SEND_ACT || aq[i].op == WEFT_PP_SEND_GRAD) &&
			    aq[i].peer == g->rank)
				c->exp[c->n++] = (pp_msg){ .op = aq[i].op, .micro = aq[i].micro,
							   .stage = aq[i].stage,
							   .idx = idx[q * cap + i] };
	}
out:
	g_host->mem_free(pos);
	g_host->mem_free(match);
	g_host->mem_free(idx);
	g_host->mem_free(a);
	g_host->mem_free(n);
	return st;
}

/* Posts this rank's next receive in the global order (the channel whose
 * next message has the lowest number), when its number is below `below`;
 * *posted says whether it did. n: the floats of a message whose
 * micro-batch's count is unknown (no counts yet). */
static weft_status post_next(pp_msgs *ms, int64_t below, int64_t n, int *posted)
{
	pp_chan *c = NULL;
	pp_msg *x;
	weft_comm_buf b;
	int peer = -1;
	weft_status st;

	*posted = 0;
	for (int q = 0; q < ms->g->size; q++) {
		pp_chan *cq = &ms->from[q];

		if (q != ms->g->rank && cq->next_post < cq->n &&
		    (!c || cq->exp[cq->next_post].idx < c->exp[c->next_post].idx)) {
			c = cq;
			peer = q;
		}
	}
	if (!c || c->exp[c->next_post].idx >= below)
		return WEFT_OK;
	x = &c->exp[c->next_post];
	st = get_buf(ms, &x->buf);
	if (st)
		return st;
	b = cbuf(ms, x->buf, ms->counts ? ms->counts[x->micro] : n);
	st = ms->g->ops->recv(ms->g->comm, &b, peer, &x->work);
	if (st) {
		put_buf(ms, x->buf);
		return g_host->error_wrap(st, "strategy 'pp': receiving the %s of micro-batch %d "
					  "from pipeline rank %d",
					  x->op == WEFT_PP_SEND_ACT ? "activation" : "gradient", x->micro,
					  peer);
	}
	x->posted = 1;
	c->next_post++;
	ms->calls++;
	*posted = 1;
	return WEFT_OK;
}

weft_status pp_msgs_send(pp_msgs *ms, weft_ctx *ctx, int op, int micro, int stage, int peer,
			 const float *data, int64_t n)
{
	int posted = 1;

	weft_comm_buf b;
	float *buf;
	weft_status st;

	if (n > ms->buf_numel)
		return g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'pp': message of %lld floats "
					 "exceeds the buffers' %lld", (long long)n,
					 (long long)ms->buf_numel);
	if (ms->n_sent >= ms->n_send_idx)
		return g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'pp': send %d of the step, "
					 "but the schedule has %d", ms->n_sent + 1, ms->n_send_idx);
	/* the receives ordered before this send go first on the comm stream */
	while (posted) {
		st = post_next(ms, ms->send_idx[ms->n_sent], n, &posted);
		if (st)
			return st;
	}
	st = get_buf(ms, &buf);
	if (st)
		return st;
	st = msg_copy(ctx, buf, data, n);
	if (st) {
		put_buf(ms, buf);
		return g_host->error_wrap(st, "strategy 'pp': copying the message of micro-batch "
					  "%d from stage %d", micro, stage);
	}
	if (ms->n_sends == ms->cap_sends) {
		int cap = ms->cap_sends ? 2 * ms->cap_sends : 16;
		pp_msg *ns = g_host->mem_alloc(WEFT_MEM_OTHER, (size_t)cap * sizeof(pp_msg));

		if (!ns) {
			put_buf(ms, buf);
			return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'pp': send list");
		}
		if (ms->sends)
			memcpy(ns, ms->sends, (size_t)ms->n_sends * sizeof(pp_msg));
		g_host->mem_free(ms->sends);
		ms->sends = ns;
		ms->cap_sends = cap;
	}
	b = cbuf(ms, buf, n);
	st = ms->g->ops->send(ms->g->comm, &b, peer, &ms->sends[ms->n_sends].work);
	if (st) {
		put_buf(ms, buf);
		return g_host->error_wrap(st, "strategy 'pp': sending the %s of micro-batch %d from "
					  "stage %d to pipeline rank %d",
					  op == WEFT_PP_SEND_ACT ? "activation" : "gradient", micro, stage,
					  peer);
	}
	ms->sends[ms->n_sends].buf = buf;
	ms->sends[ms->n_sends].op = op;
	ms->sends[ms->n_sends].micro = micro;
	ms->sends[ms->n_sends].stage = stage;
	ms->n_sends++;
	ms->n_sent++;
	ms->bytes += n * 4;
	ms->calls++;
	return WEFT_OK;
}

weft_status pp_msgs_recv(pp_msgs *ms, weft_ctx *ctx, int op, int micro, int stage, int peer,
			 float *data, int64_t n)
{
	pp_chan *c = &ms->from[peer];
	int send_op = op == WEFT_PP_RECV_ACT ? WEFT_PP_SEND_ACT : WEFT_PP_SEND_GRAD;
	int from_stage = op == WEFT_PP_RECV_ACT ? stage - 1 : stage + 1;
	int j;
	int64_t t0;
	weft_status st;

	for (j = 0; j < c->n; j++)
		if (c->exp[j].op == send_op && c->exp[j].micro == micro &&
		    c->exp[j].stage == from_stage && !c->exp[j].taken)
			break;
	if (j == c->n)
		return g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'pp': pipeline rank %d never "
					 "sends the %s of micro-batch %d stage %d", peer,
					 op == WEFT_PP_RECV_ACT ? "activation" : "gradient", micro,
					 from_stage);
	/* post the receives numbered up to this one, from whichever peer */
	while (c->next_post <= j) {
		int posted;

		st = post_next(ms, c->exp[j].idx + 1, n, &posted);
		if (st)
			return st;
		if (!posted)
			return g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'pp': the receive of "
						 "micro-batch %d from pipeline rank %d is out of the "
						 "step's message order", micro, peer);
	}
	t0 = weft_clock_ns();
	st = ms->g->ops->wait(c->exp[j].work, -1);
	ms->wait_ns += weft_clock_ns() - t0;
	c->exp[j].work = NULL;
	c->exp[j].taken = 1;
	if (st) {
		put_buf(ms, c->exp[j].buf);
		return g_host->error_wrap(st, "strategy 'pp': receiving the %s of micro-batch %d for "
					  "stage %d from pipeline rank %d",
					  op == WEFT_PP_RECV_ACT ? "activation" : "gradient", micro, stage,
					  peer);
	}
	st = msg_copy(ctx, data, c->exp[j].buf, n);
	put_buf(ms, c->exp[j].buf);
	if (st)
		return g_host->error_wrap(st, "strategy 'pp': copying the message of micro-batch %d "
					  "for stage %d", micro, stage);
	return WEFT_OK;
}

weft_status pp_msgs_finish(pp_msgs *ms)
{
	weft_status st = WEFT_OK;
	int64_t t0 = weft_clock_ns();

	for (int i = 0; i < ms->n_sends; i++) {
		weft_status w = ms->g->ops->wait(ms->sends[i].work, -1);

		if (w && !st)
			st = g_host->error_wrap(w, "strategy 'pp': sending the %s of micro-batch %d "
						"from stage %d",
						ms->sends[i].op == WEFT_PP_SEND_ACT ? "activation" :
						"gradient", ms->sends[i].micro, ms->sends[i].stage);
		put_buf(ms, ms->sends[i].buf);
	}
	ms->n_sends = 0;
	ms->n_sent = 0;
	ms->wait_ns += weft_clock_ns() - t0;
	for (int q = 0; ms->from && q < ms->g->size; q++) {
		pp_chan *c = &ms->from[q];

		/* posted but never taken can only follow an error: drain them */
		for (int j = 0; j < c->next_post; j++) {
			if (c->exp[j].work) {
				ms->g->ops->wait(c->exp[j].work, -1);
				put_buf(ms, c->exp[j].buf);
				c->exp[j].work = NULL;
			}
			c->exp[j].taken = c->exp[j].posted = 0;
		}
		c->next_post = 0;
	}
	return st;
}

void pp_msgs_free(pp_msgs *ms)
{
	if (ms->g)
		pp_msgs_finish(ms);
	for (int i = 0; i < ms->n_free; i++)
		ms->k->mem_free(ms->dev_index, WEFT_MEM_COMM, ms->free_bufs[i], buf_bytes(ms));
	g_host->mem_free(ms->free_bufs);
	g_host->mem_free(ms->sends);
	g_host->mem_free(ms->send_idx);
	if (ms->g)
		chans_free(ms);
	memset(ms, 0, sizeof(*ms));
}
