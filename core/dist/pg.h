/* core/dist: process groups, the collective ledger and the device mesh.
 *
 * A process group (weft_pg) is one backend communicator (a comm plugin's
 * weft_comm) plus what the host adds around it:
 *   - a collective ledger: the sequence number, op, dtype and count of the
 *     last WEFT_LEDGER_LEN collectives this rank issued. When a collective
 *     fails or times out, every rank that can still reach the store
 *     publishes its ledger there and compares it with the others', and the
 *     error names the rank that fell behind, called something different, or
 *     did not answer at all;
 *   - splitting by color/key (through the backend's split, or through the
 *     store when the backend has none);
 *   - a device mesh built from splits (docs/distributed.md, "Mesh").
 * Creating a group sets SIGPIPE to ignored when it has the default action
 * (a dead peer must give an error, not kill the rank).
 * Calls on one group are not thread-safe: issue collectives from one
 * thread (the backend runs them on its own comm thread).
 */
#ifndef WEFT_DIST_PG_H
#define WEFT_DIST_PG_H

#include "dist/dist.h"
#include "weft/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_LEDGER_LEN 16

typedef struct weft_pg weft_pg;

/* Creates the group `name` of `size` ranks with this process as `rank` on
 * backend `ops` (a loaded comm plugin's vtable), meeting the others
 * through `store` (borrowed; must outlive the group). timeout_ms bounds
 * the rendezvous and every collective (trainer.comm_timeout); bind_host
 * as weft_comm_init_args. Blocks until every rank arrived. Free with
 * weft_pg_destroy. Errors: those of the backend's init, naming the ranks
 * that did not arrive. */
weft_status weft_pg_create(const weft_comm_ops *ops, weft_store_client *store, int rank, int size,
			   const char *name, int64_t timeout_ms, const char *bind_host,
			   weft_pg **out);

/* As weft_pg_create, passing the backend its options mapping (the
 * trainer.comm mapping; weft_comm_init_args.options), borrowed: it must
 * outlive the group and the groups split from it, which get it too. */
weft_status weft_pg_create_opts(const weft_comm_ops *ops, weft_store_client *store, int rank,
				int size, const char *name, int64_t timeout_ms,
				const char *bind_host, const weft_cfg *options, weft_pg **out);

/* As weft_pg_create_opts, for buffers on `device` (weft_comm_init_args.
 * device and device_index: the rank's GPU for a CUDA run, which comm nccl
 * needs and binds its communicator to; WEFT_COMM_DEVICE_CPU, 0 otherwise).
 * The groups split from it (weft_pg_split, meshes, host->comm_split) get
 * the same device. weft_pg_create and weft_pg_create_opts are this with
 * the CPU. */
weft_status weft_pg_create_dev(const weft_comm_ops *ops, weft_store_client *store, int rank,
			       int size, const char *name, int64_t timeout_ms,
			       const char *bind_host, const weft_cfg *options,
			       weft_comm_device device, int32_t device_index, weft_pg **out);

/* Destroys the communicator (blocks until its comm thread stopped). */
void weft_pg_destroy(weft_pg *pg);

int weft_pg_rank(const weft_pg *pg);
int weft_pg_size(const weft_pg *pg);
const char *weft_pg_name(const weft_pg *pg);

/* The backend communicator and vtable, for code that calls them directly
 * (no ledger then). Borrowed. */
weft_comm *weft_pg_comm(const weft_pg *pg);
const weft_comm_ops *weft_pg_ops(const weft_pg *pg);

/* Collective: ranks with the same color form a new group ordered by key
 * (ties: by rank in pg); color < 0 gives *out = NULL. Every rank of pg
 * must call it. The new group is named "<pg name>/s<N>c<color>" where N
 * counts this group's splits. Free it with weft_pg_destroy. */
weft_status weft_pg_split(weft_pg *pg, int color, int key, weft_pg **out);

/* The collectives: as the matching weft_comm_ops members (weft/comm.h),
 * recorded in the ledger. With work == NULL they block (at most the
 * group's timeout); on failure the message ends with the ledger's
 * diagnosis. With a work handle, pass it to weft_pg_wait. */
weft_status weft_pg_all_reduce(weft_pg *pg, const weft_comm_buf *send, const weft_comm_buf *recv,
			       weft_comm_redop op, weft_comm_work **work);
weft_status weft_pg_reduce_scatter(weft_pg *pg, const weft_comm_buf *send,
				   const weft_comm_buf *recv, weft_comm_redop op,
				   weft_comm_work **work);
weft_status weft_pg_all_gather(weft_pg *pg, const weft_comm_buf *send, const weft_comm_buf *recv,
			       weft_comm_work **work);
weft_status weft_pg_broadcast(weft_pg *pg, const weft_comm_buf *buf, int root,
			      weft_comm_work **work);
weft_status weft_pg_send(weft_pg *pg, const weft_comm_buf *buf, int peer, weft_comm_work **work);
weft_status weft_pg_recv(weft_pg *pg, const weft_comm_buf *buf, int peer, weft_comm_work **work);
weft_status weft_pg_all_to_all(weft_pg *pg, const weft_comm_buf *send, const weft_comm_buf *recv,
			       weft_comm_work **work);
weft_status weft_pg_barrier(weft_pg *pg, weft_comm_work **work);

/* Waits for a handle from this group (at most timeout_ms; < 0: the group's
 * timeout) and releases it. On failure, runs the ledger comparison and
 * appends its diagnosis to the message. */
weft_status weft_pg_wait(weft_pg *pg, weft_comm_work *work, int64_t timeout_ms);

/* The ledger comparison on its own: publishes this rank's ledger, reads the
 * others' (waiting at most wait_ms for them) and writes one line per rank
 * that differs into out ("rank 2 did not answer", "rank 1 called
 * all_gather #5 (f32 x 8) where rank 0 called all_reduce #5 (f32 x 8)").
 * Used by weft_pg_wait; exposed for tests and for the trainer's own
 * failure reports. Never fails: problems reaching the store are reported in
 * out. */
void weft_pg_diagnose(weft_pg *pg, int64_t wait_ms, char *out, size_t len);

/* ---- device mesh ------------------------------------------------------ */

#define WEFT_MESH_MAX_DIMS 4

typedef struct weft_mesh weft_mesh;

/* Arranges the ranks of `world` as an ndims-dimensional grid dims[0] x ...
 * (product must equal the world size), row-major: the last dimension
 * varies fastest, so rank = ((c0 * d1) + c1) * d2 + c2 for (dp, tp, pp) =
 * (c0, c1, c2). For each dimension it splits world into the groups of ranks
 * that differ only in that coordinate ("tp" groups hold consecutive ranks
 * when tp is last). names[i] names dimension i. Collective over world.
 * Free with weft_mesh_destroy (the world group stays the caller's).
 * Errors: WEFT_ERR_CONFIG when the product differs from the world size,
 * naming the dims; those of weft_pg_split. */
weft_status weft_mesh_create(weft_pg *world, int ndims, const int *dims, const char *const *names,
			     weft_mesh **out);

void weft_mesh_destroy(weft_mesh *mesh);

/* The group along the dimension called `name` (NULL when there is none).
 * Borrowed: valid until weft_mesh_destroy. */
weft_pg *weft_mesh_group(const weft_mesh *mesh, const char *name);

/* This rank's coordinate along the dimension called `name`; -1 if none. */
int weft_mesh_coord(const weft_mesh *mesh, const char *name);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_DIST_PG_H */
