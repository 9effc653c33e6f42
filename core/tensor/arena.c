/* Arenas: bump allocation from a few device blocks, consolidated into one
 * block on reset so that a steady per-step workload stops allocating. */
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_impl.h"
#include "weft/device.h"

#define ARENA_MAX_BLOCKS 48 /* blocks at least double: 48 covers any size */

typedef struct arena_block {
	void *mem;
	size_t size;
	size_t used;
} arena_block;

struct weft_arena {
	weft_device dev;
	const weft_kernel_table *k;
	weft_mem_category cat;
	size_t initial;
	arena_block blocks[ARENA_MAX_BLOCKS];
	int nblocks;
	int cur;
	size_t used;       /* this cycle, with padding */
	size_t high_water;
	int64_t block_allocs;
};

weft_status weft_arena_create(weft_device dev, weft_mem_category cat, size_t initial_bytes,
			      weft_arena **out)
{
	const weft_kernel_table *k;
	weft_arena *a;
	weft_status st;

	*out = NULL;
	st = weft_kernels_get(dev, &k);
	if (st)
		return st;
	a = weft_mem_calloc(WEFT_MEM_OTHER, sizeof(*a));
	if (!a)
		return weft_error_wrap(WEFT_ERR_NOMEM, "creating an arena");
	a->dev = dev;
	a->k = k;
	a->cat = cat;
	a->initial = initial_bytes ? initial_bytes : ARENA_DEFAULT_BYTES;
	*out = a;
	return WEFT_OK;
}

static void free_blocks(weft_arena *a)
{
	for (int i = 0; i < a->nblocks; i++)
		a->k->mem_free(a->dev.index, a->cat, a->blocks[i].mem, a->blocks[i].size);
	a->nblocks = 0;
	a->cur = 0;
}

void weft_arena_free(weft_arena *a)
{
	if (!a)
		return;
	free_blocks(a);
	weft_mem_free(a);
}

static size_t pad_for(const arena_block *b, size_t align)
{
	uintptr_t p = (uintptr_t)b->mem + b->used;

	return (size_t)((align - (p & (align - 1))) & (align - 1));
}

static weft_status add_block(weft_arena *a, size_t need)
{
	size_t size = a->initial;
	arena_block *b;
	weft_status st;

	if (a->nblocks && a->blocks[a->nblocks - 1].size * 2 > size)
		size = a->blocks[a->nblocks - 1].size * 2;
	if (size < need)
		size = need;
	if (a->nblocks == ARENA_MAX_BLOCKS)
		return weft_error_set(WEFT_ERR_NOMEM, "arena for %s holds %d blocks already; "
				      "cannot add one of %zu bytes",
				      weft_mem_category_name(a->cat), ARENA_MAX_BLOCKS, size);
	b = &a->blocks[a->nblocks];
	st = a->k->mem_alloc(a->dev.index, a->cat, size, &b->mem);
	if (st)
		return weft_error_wrap(st, "growing the %s arena by %zu bytes",
				       weft_mem_category_name(a->cat), size);
	b->size = size;
	b->used = 0;
	a->nblocks++;
	a->block_allocs++;
	return WEFT_OK;
}

weft_status weft_arena_alloc(weft_arena *a, size_t bytes, size_t align, void **out)
{
	arena_block *b;
	size_t pad;
	weft_status st;

	*out = NULL;
	if (align == 0)
		align = 64;
	if (align & (align - 1))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "arena alignment %zu is not a power of two",
				      align);
	if (bytes > SIZE_MAX / 2 - align)
		return weft_error_set(WEFT_ERR_NOMEM, "arena request of %zu bytes for %s is too large",
				      bytes, weft_mem_category_name(a->cat));
	for (;;) {
		if (a->cur < a->nblocks) {
			b = &a->blocks[a->cur];
			pad = pad_for(b, align);
			if (b->used + pad + bytes <= b->size) {
				*out = (char *)b->mem + b->used + pad;
				b->used += pad + bytes;
				a->used += pad + bytes;
				if (a->used > a->high_water)
					a->high_water = a->used;
				return WEFT_OK;
			}
			if (a->cur + 1 < a->nblocks) {
				/* the rest of this block is lost for the cycle; `used`
				 * counts what was handed out, which is what one block
				 * holding the whole cycle needs (weft_arena_reset) */
				a->cur++;
				continue;
			}
		}
		st = add_block(a, bytes + align);
		if (st)
			return st;
		if (a->nblocks > 1 && a->cur < a->nblocks - 1)
			a->cur = a->nblocks - 1;
	}
}

size_t weft_arena_steady_bytes(size_t high_water, size_t initial)
{
	if (!initial)
		initial = ARENA_DEFAULT_BYTES;
	if (high_water <= initial)
		return initial;
	return high_water + high_water / 8 + 4096;
}

void weft_arena_reset(weft_arena *a)
{
	arena_block one = { 0 };

	if (!a)
		return;
	if (a->nblocks > 1) {
		/* the old blocks go first, so the process never holds them and
		 * their replacement at once (that sum, up to three times a
		 * cycle's use, was the arena's peak) */
		one.size = weft_arena_steady_bytes(a->high_water, a->initial);
		free_blocks(a);
		a->nblocks = 0;
		if (a->k->mem_alloc(a->dev.index, a->cat, one.size, &one.mem) == WEFT_OK) {
			a->blocks[0] = one;
			a->nblocks = 1;
			a->block_allocs++;
		} /* else the arena starts empty and grows again on demand */
	}
	for (int i = 0; i < a->nblocks; i++)
		a->blocks[i].used = 0;
	a->cur = 0;
	a->used = 0;
}

void arena_mark(const weft_arena *a, arena_pos *out)
{
	out->cur = a->cur;
	out->block_used = a->cur < a->nblocks ? a->blocks[a->cur].used : 0;
	out->used = a->used;
}

void arena_release(weft_arena *a, const arena_pos *pos)
{
	for (int i = pos->cur + 1; i < a->nblocks; i++)
		a->blocks[i].used = 0;
	if (pos->cur < a->nblocks)
		a->blocks[pos->cur].used = pos->block_used;
	a->cur = pos->cur;
	a->used = pos->used;
}

void weft_arena_get_stats(const weft_arena *a, weft_arena_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->used = a->used;
	out->high_water = a->high_water;
	out->block_allocs = a->block_allocs;
	for (int i = 0; i < a->nblocks; i++)
		out->capacity += a->blocks[i].size;
}

weft_device weft_arena_device(const weft_arena *a)
{
	return a->dev;
}
