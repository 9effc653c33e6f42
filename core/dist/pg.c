/* Process groups: a backend communicator plus the collective ledger, and
 * splitting by color/key. */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/pg.h"
#include "weft/log.h"

typedef struct ledger_entry {
	uint64_t seq;
	const char *op;
	weft_comm_dtype dtype;
	int64_t count;
} ledger_entry;

struct weft_pg {
	const weft_comm_ops *ops;
	weft_comm *comm;
	weft_store_client *store;
	char *name;
	int rank, size;
	int64_t timeout_ms;
	const char *bind_host;
	const weft_cfg *options; /* the backend's options mapping, or NULL */
	weft_comm_device device; /* where the buffers live; splits inherit it */
	int32_t device_index;
	int nsplits;
	int diagnosed;
	uint64_t seq; /* collectives issued */
	ledger_entry ledger[WEFT_LEDGER_LEN];
};

weft_status weft_pg_create(const weft_comm_ops *ops, weft_store_client *store, int rank, int size,
			   const char *name, int64_t timeout_ms, const char *bind_host,
			   weft_pg **out)
{
	return weft_pg_create_opts(ops, store, rank, size, name, timeout_ms, bind_host, NULL, out);
}

weft_status weft_pg_create_opts(const weft_comm_ops *ops, weft_store_client *store, int rank,
				int size, const char *name, int64_t timeout_ms,
				const char *bind_host, const weft_cfg *options, weft_pg **out)
{
	return weft_pg_create_dev(ops, store, rank, size, name, timeout_ms, bind_host, options,
				  WEFT_COMM_DEVICE_CPU, 0, out);
}

weft_status weft_pg_create_dev(const weft_comm_ops *ops, weft_store_client *store, int rank,
			       int size, const char *name, int64_t timeout_ms,
			       const char *bind_host, const weft_cfg *options,
			       weft_comm_device device, int32_t device_index, weft_pg **out)
{
	weft_comm_init_args args = {
		.struct_size = sizeof(args),
		.rank = rank,
		.size = size,
		.store = weft_store_client_vtable(store),
		.name = name,
		.timeout_ms = timeout_ms,
		.device = device,
		.device_index = device_index,
		.bind_host = bind_host,
		.options = options,
	};
	weft_pg *pg = calloc(1, sizeof(*pg));
	struct sigaction sa;
	weft_status st;

	/* A peer that died closes its sockets; the backend's next write must
	 * fail with EPIPE (and name the peer) rather than kill this rank with
	 * SIGPIPE. Only the default action is replaced. */
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL)
		signal(SIGPIPE, SIG_IGN);
	if (!pg || !(pg->name = strdup(name))) {
		free(pg);
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory for process group '%s'", name);
	}
	st = ops->init(&args, &pg->comm);
	if (st) {
		free(pg->name);
		free(pg);
		return st;
	}
	pg->ops = ops;
	pg->store = store;
	pg->rank = rank;
	pg->size = size;
	pg->timeout_ms = timeout_ms;
	pg->bind_host = bind_host;
	pg->options = options;
	pg->device = device;
	pg->device_index = device_index;
	*out = pg;
	return WEFT_OK;
}

void weft_pg_destroy(weft_pg *pg)
{
	if (!pg)
		return;
	pg->ops->destroy(pg->comm);
	free(pg->name);
	free(pg);
}

int weft_pg_rank(const weft_pg *pg)
{
	return pg->rank;
}

int weft_pg_size(const weft_pg *pg)
{
	return pg->size;
}

const char *weft_pg_name(const weft_pg *pg)
{
	return pg->name;
}

weft_comm *weft_pg_comm(const weft_pg *pg)
{
	return pg->comm;
}

const weft_comm_ops *weft_pg_ops(const weft_pg *pg)
{
	return pg->ops;
}

/* ---- ledger ------------------------------------------------------------ */

static void record(weft_pg *pg, const char *op, weft_comm_dtype dt, int64_t count)
{
	pg->seq++;
	pg->ledger[pg->seq % WEFT_LEDGER_LEN] = (ledger_entry){
		.seq = pg->seq, .op = op, .dtype = dt, .count = count,
	};
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "last=<seq>\n" then one "seq op dtype count\n" per remembered entry. */
static size_t ledger_text(const weft_pg *pg, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "last=%" PRIu64 "\n", pg->seq);
	uint64_t first = pg->seq >= WEFT_LEDGER_LEN ? pg->seq - WEFT_LEDGER_LEN + 1 : 1;

	for (uint64_t s = first; s <= pg->seq && n < len; s++) {
		const ledger_entry *e = &pg->ledger[s % WEFT_LEDGER_LEN];

		n += (size_t)snprintf(buf + n, len - n, "%" PRIu64 " %s %s %" PRId64 "\n", e->seq,
				      e->op, weft_comm_dtype_name(e->dtype), e->count);
	}
	return n < len ? n : len - 1;
}

/* Finds entry `seq` in a published ledger; fills desc ("op #seq (dt x n)"). */
static int find_entry(const char *text, uint64_t seq, char *desc, size_t len)
{
	for (const char *line = strchr(text, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
		unsigned long long s;
		char op[32], dt[8];
		long long count;

		if (sscanf(line + 1, "%llu %31s %7s %lld", &s, op, dt, &count) == 4 && s == seq) {
			if (!strcmp(op, "barrier"))
				snprintf(desc, len, "barrier #%llu", s);
			else
				snprintf(desc, len, "%s #%llu (%s x %lld)", op, s, dt, count);
			return 1;
		}
	}
	return 0;
}

static void append(char *out, size_t len, const char *fmt, ...) WEFT_PRINTF(3, 4);
static void append(char *out, size_t len, const char *fmt, ...)
{
	size_t n = strlen(out);
	va_list ap;

	if (n + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(out + n, len - n, fmt, ap);
	va_end(ap);
}

void weft_pg_diagnose(weft_pg *pg, int64_t wait_ms, char *out, size_t len)
{
	char mine[4096], key[512], my_desc[160], desc[160];
	int64_t deadline = now_ms() + wait_ms;
	int differ = 0;

	out[0] = '\0';
	ledger_text(pg, mine, sizeof(mine));
	snprintf(key, sizeof(key), "%s/ledger/%d", pg->name, pg->rank);
	if (weft_store_set(pg->store, key, mine, strlen(mine))) {
		snprintf(out, len, "the store is unreachable, so ranks cannot compare their "
			 "collectives (%s)", weft_error_last());
		return;
	}
	if (!find_entry(mine, pg->seq, my_desc, sizeof(my_desc)))
		snprintf(my_desc, sizeof(my_desc), "no collective yet");
	for (int r = 0; r < pg->size; r++) {
		void *val = NULL;
		size_t vlen;
		unsigned long long last = 0;
		int64_t left = deadline - now_ms();

		if (r == pg->rank)
			continue;
		snprintf(key, sizeof(key), "%s/ledger/%d", pg->name, r);
		if (weft_store_get(pg->store, key, left > 0 ? left : 0, &val, &vlen)) {
			append(out, len, "%srank %d did not answer within %lld ms (it exited, or is "
			       "stuck outside collectives)", differ++ ? "; " : "", r,
			       (long long)wait_ms);
			continue;
		}
		sscanf(val, "last=%llu", &last);
		if (last < pg->seq) {
			if (!find_entry(val, last, desc, sizeof(desc)))
				snprintf(desc, sizeof(desc), "none");
			append(out, len, "%srank %d fell behind: its last collective is %s while "
			       "rank %d is at %s", differ++ ? "; " : "", r,
			       last ? desc : "none (it issued no collective)", pg->rank, my_desc);
		} else if (find_entry(val, pg->seq, desc, sizeof(desc)) && strcmp(desc, my_desc)) {
			append(out, len, "%srank %d called %s where rank %d called %s",
			       differ++ ? "; " : "", r, desc, pg->rank, my_desc);
		} else if (last > pg->seq) {
			append(out, len, "%srank %d is ahead at collective #%llu while rank %d is at "
			       "%s", differ++ ? "; " : "", r, last, pg->rank, my_desc);
		}
		free(val);
	}
	if (!differ)
		snprintf(out, len, "every rank answered and is at %s", my_desc);
}

/* After a failed collective: adds the ledger's diagnosis to the message. */
static weft_status diagnose_failure(weft_pg *pg, weft_status st)
{
	char first[2048], diag[2048];
	int64_t wait = pg->timeout_ms < 3000 ? pg->timeout_ms : 3000;

	if (st != WEFT_ERR_TIMEOUT && st != WEFT_ERR_COMM)
		return st;
	snprintf(first, sizeof(first), "%s", weft_error_last());
	if (pg->diagnosed)
		return st;
	pg->diagnosed = 1;
	weft_pg_diagnose(pg, wait, diag, sizeof(diag));
	weft_log(WEFT_LOG_ERROR, "group '%s': collective failed; ledger: %s", pg->name, diag);
	return weft_error_set(st, "%s; ledger: %s", first, diag);
}

/* After issuing: a caller mistake takes its ledger entry back (nothing
 * ran); a comm failure gets the ledger's diagnosis. */
static weft_status finish(weft_pg *pg, weft_status st)
{
	if (st == WEFT_ERR_INVALID_ARG || st == WEFT_ERR_SHAPE || st == WEFT_ERR_DTYPE ||
	    st == WEFT_ERR_UNSUPPORTED) {
		pg->seq--;
		return st;
	}
	return st ? diagnose_failure(pg, st) : WEFT_OK;
}

weft_status weft_pg_wait(weft_pg *pg, weft_comm_work *work, int64_t timeout_ms)
{
	weft_status st = pg->ops->wait(work, timeout_ms);

	return st ? diagnose_failure(pg, st) : WEFT_OK;
}

#define ISSUE(pg, work, call) finish((pg), (call))

weft_status weft_pg_all_reduce(weft_pg *pg, const weft_comm_buf *send, const weft_comm_buf *recv,
			       weft_comm_redop op, weft_comm_work **work)
{
	record(pg, "all_reduce", send->dtype, send->count);
	return ISSUE(pg, work, pg->ops->all_reduce(pg->comm, send, recv, op, work));
}

weft_status weft_pg_reduce_scatter(weft_pg *pg, const weft_comm_buf *send,
				   const weft_comm_buf *recv, weft_comm_redop op,
				   weft_comm_work **work)
{
	record(pg, "reduce_scatter", send->dtype, send->count);
	return ISSUE(pg, work, pg->ops->reduce_scatter(pg->comm, send, recv, op, work));
}

weft_status weft_pg_all_gather(weft_pg *pg, const weft_comm_buf *send, const weft_comm_buf *recv,
			       weft_comm_work **work)
{
	record(pg, "all_gather", send->dtype, send->count);
	return ISSUE(pg, work, pg->ops->all_gather(pg->comm, send, recv, work));
}

weft_status weft_pg_broadcast(weft_pg *pg, const weft_comm_buf *buf, int root,
			      weft_comm_work **work)
{
	record(pg, "broadcast", buf->dtype, buf->count);
	return ISSUE(pg, work, pg->ops->broadcast(pg->comm, buf, root, work));
}

weft_status weft_pg_send(weft_pg *pg, const weft_comm_buf *buf, int peer, weft_comm_work **work)
{
	return pg->ops->send(pg->comm, buf, peer, work);
}

weft_status weft_pg_recv(weft_pg *pg, const weft_comm_buf *buf, int peer, weft_comm_work **work)
{
	return pg->ops->recv(pg->comm, buf, peer, work);
}

weft_status weft_pg_all_to_all(weft_pg *pg, const weft_comm_buf *send, const weft_comm_buf *recv,
			       weft_comm_work **work)
{
	record(pg, "all_to_all", send->dtype, send->count);
	return ISSUE(pg, work, pg->ops->all_to_all(pg->comm, send, recv, work));
}

weft_status weft_pg_barrier(weft_pg *pg, weft_comm_work **work)
{
	record(pg, "barrier", WEFT_COMM_F32, 0);
	return ISSUE(pg, work, pg->ops->barrier(pg->comm, work));
}

/* ---- split ---------------------------------------------------------------- */

typedef struct member {
	int rank, color, key;
} member;

static int by_key(const void *a, const void *b)
{
	const member *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->rank - y->rank;
}

weft_status weft_pg_split(weft_pg *pg, int color, int key, weft_pg **out)
{
	char k[512], v[64], name[512];
	member *all;
	int n = 0, me = -1, split = ++pg->nsplits;
	weft_status st = WEFT_OK;

	*out = NULL;
	snprintf(k, sizeof(k), "%s/split%d/%d", pg->name, split, pg->rank);
	snprintf(v, sizeof(v), "%d %d", color, key);
	if ((st = weft_store_set(pg->store, k, v, strlen(v))))
		return weft_error_wrap(st, "splitting group '%s'", pg->name);
	all = calloc((size_t)pg->size, sizeof(*all));
	if (!all)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory splitting '%s'", pg->name);
	for (int r = 0; r < pg->size; r++) {
		void *val;
		size_t len;
		int c, kk;

		snprintf(k, sizeof(k), "%s/split%d/%d", pg->name, split, r);
		st = weft_store_get(pg->store, k, pg->timeout_ms, &val, &len);
		if (st) {
			st = weft_error_wrap(st, "splitting group '%s': rank %d did not take part "
					     "(every rank must call split)", pg->name, r);
			goto out_free;
		}
		sscanf(val, "%d %d", &c, &kk);
		free(val);
		if (c == color && color >= 0)
			all[n++] = (member){ .rank = r, .color = c, .key = kk };
	}
	if (color < 0)
		goto out_free;
	qsort(all, (size_t)n, sizeof(*all), by_key);
	for (int i = 0; i < n; i++)
		if (all[i].rank == pg->rank)
			me = i;
	snprintf(name, sizeof(name), "%s/s%dc%d", pg->name, split, color);
	st = weft_pg_create_dev(pg->ops, pg->store, me, n, name, pg->timeout_ms, pg->bind_host,
				pg->options, pg->device, pg->device_index, out);
out_free:
	free(all);
	return st;
}

/* ---- mesh ------------------------------------------------------------------ */

struct weft_mesh {
	int ndims;
	int dims[WEFT_MESH_MAX_DIMS];
	int coord[WEFT_MESH_MAX_DIMS];
	char names[WEFT_MESH_MAX_DIMS][32];
	weft_pg *groups[WEFT_MESH_MAX_DIMS];
};

weft_status weft_mesh_create(weft_pg *world, int ndims, const int *dims, const char *const *names,
			     weft_mesh **out)
{
	weft_mesh *m;
	int64_t prod = 1;
	weft_status st = WEFT_OK;
	char shape[128] = "";

	if (ndims < 1 || ndims > WEFT_MESH_MAX_DIMS)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "a mesh has 1 to %d dimensions, not %d",
				      WEFT_MESH_MAX_DIMS, ndims);
	for (int d = 0; d < ndims; d++) {
		append(shape, sizeof(shape), "%s%s=%d", d ? " x " : "", names[d], dims[d]);
		prod *= dims[d] > 0 ? dims[d] : 0;
	}
	if (prod != world->size)
		return weft_error_set(WEFT_ERR_CONFIG, "mesh %s holds %lld ranks but the world has "
				      "%d; make the product of the sizes equal the number of "
				      "processes (devices x num_nodes)", shape, (long long)prod,
				      world->size);
	m = calloc(1, sizeof(*m));
	if (!m)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory for mesh %s", shape);
	m->ndims = ndims;
	/* row-major coordinates, last dimension fastest */
	for (int d = ndims - 1, r = world->rank; d >= 0; d--) {
		m->dims[d] = dims[d];
		m->coord[d] = r % dims[d];
		r /= dims[d];
		snprintf(m->names[d], sizeof(m->names[d]), "%s", names[d]);
	}
	for (int d = 0; d < ndims && !st; d++) {
		int color = 0;

		/* the rank's linear index with coordinate d left out */
		for (int e = 0; e < ndims; e++)
			if (e != d)
				color = color * dims[e] + m->coord[e];
		st = weft_pg_split(world, color, m->coord[d], &m->groups[d]);
	}
	if (st) {
		weft_mesh_destroy(m);
		return weft_error_wrap(st, "building mesh %s", shape);
	}
	*out = m;
	return WEFT_OK;
}

void weft_mesh_destroy(weft_mesh *mesh)
{
	if (!mesh)
		return;
	for (int d = 0; d < mesh->ndims; d++)
		weft_pg_destroy(mesh->groups[d]);
	free(mesh);
}

weft_pg *weft_mesh_group(const weft_mesh *mesh, const char *name)
{
	for (int d = 0; d < mesh->ndims; d++)
		if (!strcmp(mesh->names[d], name))
			return mesh->groups[d];
	return NULL;
}

int weft_mesh_coord(const weft_mesh *mesh, const char *name)
{
	for (int d = 0; d < mesh->ndims; d++)
		if (!strcmp(mesh->names[d], name))
			return mesh->coord[d];
	return -1;
}
