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
