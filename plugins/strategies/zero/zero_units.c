/* ZeRO's unit rule (zero.h, "Layout"): where a unit ends and how a unit is
 * split over the ranks. One copy, used by setup (zero_layout.c's
 * zero_build_units) and by the memory plan (zero_plan.c). */
#include <string.h>

#include "zero.h"

/* Length of the dotted prefix of a parameter name (up to the last dot):
 * the module that owns it. */
static size_t prefix_len(const char *name)
{
	const char *dot = name ? strrchr(name, '.') : NULL;

	return dot ? (size_t)(dot - name) : 0;
}

static int same_module(const char *a, const char *b)
{
	size_t la = prefix_len(a);

	return la == prefix_len(b) && !strncmp(a, b, la);
}

int64_t zero_unit_cap(const zero *z)
{
	return z->reduce_bucket_size < z->allgather_bucket_size ? z->reduce_bucket_size :
								  z->allgather_bucket_size;
}

int zero_unit_starts(const zero *z, const char *first, int64_t len, const char *name, int64_t n)
{
	if (!first)
		return 1;
	if (z->stage == 3)
		return !same_module(first, name);
	return len + n > zero_unit_cap(z);
}

void zero_unit_split(const zero *z, zunit *u, int32_t rank)
{
	int64_t len = u->hi - u->lo;

	u->chunk = (len + z->world - 1) / z->world;
	u->mine_lo = u->lo + rank * u->chunk;
	u->mine_hi = u->mine_lo + u->chunk;
	if (u->mine_lo > u->hi)
		u->mine_lo = u->hi;
	if (u->mine_hi > u->hi)
		u->mine_hi = u->hi;
	u->persist = z->stage == 3 && len < z->persistence_threshold;
}

/* ---- the sizes an option left out takes -------------------------------- */

void zero_auto_sizes(zero *z, int64_t psi)
{
	/* a bucket of 1/32 of the model: the few buckets in use stay a few
	 * percent of it, and a large model's count of collectives stays 32
	 * per pass; never under 4096 elements, never over DeepSpeed's 5e8 */
	int64_t bucket = (psi + 31) / 32;

	if (bucket < 4096)
		bucket = 4096;
	if (bucket > ZERO_DEF_BUCKET)
		bucket = ZERO_DEF_BUCKET;
	/* one of the two given: the other follows it (one unit size) */
	if (!z->given.reduce_bucket)
		z->reduce_bucket_size = z->given.allgather_bucket ? z->allgather_bucket_size : bucket;
	if (!z->given.allgather_bucket)
		z->allgather_bucket_size = z->given.reduce_bucket ? z->reduce_bucket_size : bucket;
	/* modules under 1/512 of the model (norms, biases) stay whole */
	if (!z->given.persist)
		z->persistence_threshold = psi / 512 < ZERO_DEF_PERSIST ? psi / 512 :
									  ZERO_DEF_PERSIST;
}

void zero_auto_prefetch(zero *z, int64_t gather_elems)
{
	/* one unit ahead: the largest gathered unit */
	if (!z->given.prefetch)
		z->prefetch_bucket_size = gather_elems < ZERO_DEF_PREFETCH ? gather_elems :
									       ZERO_DEF_PREFETCH;
}

int64_t zero_gather_buffers(const zero *z, int64_t gather_elems, int64_t gathered_units)
{
	int64_t ahead, live, n;

	if (z->stage != 3 || gather_elems <= 0)
		return 0;
	ahead = z->prefetch_bucket_size / gather_elems;
	live = z->max_live_parameters / gather_elems - 2;
	if (ahead > live)
		ahead = live;
	n = 2 + (ahead > 0 ? ahead : 0);
	return n < gathered_units ? n : gathered_units;
}

int64_t zero_grad_buffers(const zero *z, int64_t units)
{
	if (z->stage < 2)
		return 0;
	return units < ZERO_GRAD_BUFFERS ? units : ZERO_GRAD_BUFFERS;
}
