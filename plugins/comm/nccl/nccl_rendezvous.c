/* The NCCL unique id through the store, keyed by generation (see
 * nccl_rendezvous.h). */
#include <stdio.h>
#include <string.h>

#include "nccl_rendezvous.h"

int nccl_key_inits(char *buf, size_t len, const char *group, int32_t rank)
{
	int n = snprintf(buf, len, "%s/nccl/inits/rank%d", group, (int)rank);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int nccl_key_id(char *buf, size_t len, const char *group, int64_t gen)
{
	int n = snprintf(buf, len, "%s/nccl/%lld/unique_id", group, (long long)gen);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

weft_status nccl_exchange_id(const weft_host *host, const weft_store *store, const char *group,
			     int32_t rank, int64_t timeout_ms, const char *who,
			     nccl_make_id_fn make, void *arg, void *id, size_t bytes,
			     int64_t *gen)
{
	char inits[320], key[320];
	int64_t count = 0;
	void *val = NULL;
	size_t len = 0;
	weft_status st;

	*gen = -1;
	if (nccl_key_inits(inits, sizeof(inits), group, rank) ||
	    nccl_key_id(key, sizeof(key), group, INT64_MAX))
		return host->error_set(WEFT_ERR_INVALID_ARG, "%s: the group name '%s' is too long "
				       "for the store keys (at most 200 bytes)", who, group);
	if ((st = store->add(store->ctx, inits, 1, &count)))
		return host->error_wrap(st, "%s: counting this rank's inits of the group (store key "
					"%s)", who, inits);
	*gen = count - 1;
	nccl_key_id(key, sizeof(key), group, *gen);
	if (rank == 0) {
		if ((st = make(arg, id, bytes)))
			return st;
		if ((st = store->set(store->ctx, key, id, bytes)))
			return host->error_wrap(st, "%s: publishing the NCCL id (store key %s)", who,
						key);
		return WEFT_OK;
	}
	st = store->get(store->ctx, key, timeout_ms, &val, &len);
	if (st)
		return host->error_wrap(st, "%s: waiting for rank 0's NCCL id of this group's init "
					"number %lld (store key %s): is rank 0 running, with "
					"trainer.comm=nccl too, and has every rank created the "
					"group as often?", who, (long long)*gen + 1, key);
	if (len != bytes) {
		store->release(store->ctx, val);
		return host->error_set(WEFT_ERR_COMM, "%s: store key %s holds %zu bytes, not an NCCL "
				       "unique id (%zu bytes): is rank 0 a different weft build?",
				       who, key, len, bytes);
	}
	memcpy(id, val, bytes);
	store->release(store->ctx, val);
	return WEFT_OK;
}
