/* The NCCL unique id's trip through the rendezvous store, by generation.
 *
 * Rank 0 of a group makes the id and sets it in the store; the other ranks
 * wait for the key. A group can be made more than once under one name (a
 * communicator destroyed and created again, a sub-group rebuilt after a
 * failure), and the store keeps every key: were the key only the group's
 * name, a rank that comes back before rank 0 has set the new id would read
 * the old one, join a communicator that no longer exists and hang until
 * the timeout. So each rank counts its own inits of the group in the store
 * (an atomic add on a per-rank key: no rank can move another's count), and
 * generation g's id lives under its own key:
 *
 *   <group>/nccl/inits/rank<r>   rank r's inits of the group so far
 *   <group>/nccl/<g>/unique_id   the id of the group's g-th init (from 0)
 *
 * Every rank inits a group the same number of times (init is collective),
 * so the counts agree and generation g's rank 0 and rank r meet. The pure
 * part of the plugin: no NCCL or CUDA call, tested everywhere
 * (tests/cuda/test_nccl_rendezvous.c). */
#ifndef WEFT_NCCL_RENDEZVOUS_H
#define WEFT_NCCL_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include "weft/comm.h"
#include "weft/plugin.h"

/* "<group>/nccl/inits/rank<rank>" into buf. 0, or -1 when it does not fit. */
int nccl_key_inits(char *buf, size_t len, const char *group, int32_t rank);

/* "<group>/nccl/<gen>/unique_id" into buf. 0, or -1 when it does not fit. */
int nccl_key_id(char *buf, size_t len, const char *group, int64_t gen);

/* Makes `bytes` of a new id at id (rank 0); sets the last error on failure. */
typedef weft_status (*nccl_make_id_fn)(void *arg, void *id, size_t bytes);

/* This rank's generation of `group` (counted in the store), then the id of
 * that generation: rank 0 makes it with make(arg, ...) and sets it, the
 * others wait for it at most timeout_ms. `who` starts every message
 * ("nccl: comm 'world' rank 1/4"). *gen is the generation (for logs).
 * Errors (host->error_set or error_wrap): the store's, with the key and
 * what to check; WEFT_ERR_COMM when the value is not `bytes` long. */
weft_status nccl_exchange_id(const weft_host *host, const weft_store *store, const char *group,
			     int32_t rank, int64_t timeout_ms, const char *who,
			     nccl_make_id_fn make, void *arg, void *id, size_t bytes,
			     int64_t *gen);

#endif /* WEFT_NCCL_RENDEZVOUS_H */
