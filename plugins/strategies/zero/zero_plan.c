/* ZeRO's memory plan (weft/strategy.h, memory_plan): the units cut by the
 * rule setup cuts them with (zero_units.c), from the options create read
 * and the sizes setup gives the options left out. Rank 0 holds the most:
 * every unit gives it a whole chunk (or the whole unit when shorter).
 * Exact: the resident shards, the staging buffer, the collectives' element
 * counts and the working set, which setup makes in full (gradient buckets,
 * gathered-parameter buffers, persistent units), reported apart; stage 3's
 * setup peak (the whole parameters beside the shard), which exceeds the
 * steps' on many ranks. */
#include <stddef.h>
#include <stdio.h>

#include "zero.h"

weft_status zero_memory_plan(void *p, const weft_plan_query *q, weft_plan_result *out)
{
	zero sized = *(const zero *)p;
	zero *z = &sized;
	int64_t w = z->world, numel = 0, len = 0, chunk_sum = 0, persist_sum = 0;
	int64_t persist_bytes = 0, units = 0, shard = 0, max_chunk = 0;
	int64_t gather_elems = 0, gathered = 0;
	int64_t slots = (int64_t)q->n_slots, micro = q->n_micro;
	const char *first = NULL;
	double psi, n = (double)w;
	int offload;

	for (size_t i = 0; i < q->n_params; i++)
		if (q->params[i].dtype == WEFT_F32)
			numel += q->params[i].numel;
	zero_auto_sizes(z, numel);
	numel = 0;

	/* a unit closes at i == n_params */
	for (size_t i = 0; i <= q->n_params; i++) {
		const weft_plan_param *t = i < q->n_params ? &q->params[i] : NULL;
		int split = t ? zero_unit_starts(z, first, len, t->name, t->numel) : 1;

		/* ZeRO shards the float32 master weights; setup refuses others */
		if (t && t->dtype != WEFT_F32)
			continue;
		if (split && first) {
			zunit u = { .lo = 0, .hi = len };

			zero_unit_split(z, &u, 0);
			units++;
			chunk_sum += u.chunk;
			if (u.chunk > max_chunk)
				max_chunk = u.chunk;
			shard += u.mine_hi - u.mine_lo;
			if (u.persist) {
				persist_sum += u.chunk;
				persist_bytes += 4 * w * u.chunk;
			} else if (z->stage == 3) {
				gathered++;
				if (w * u.chunk > gather_elems)
					gather_elems = w * u.chunk;
			}
		}
		if (!t)
			break;
		if (split) {
			first = t->name;
			len = 0;
		}
		len += t->numel;
		numel += t->numel;
	}
	zero_auto_prefetch(z, gather_elems);
	/* offload_optimizer {device: cpu} on an accelerator: the optimizer
	 * slots, the fp32 master shard and a copy of the gradient shard in
	 * host memory (zero_offload_setup); on the CPU it changes nothing */
	offload = z->offload_asked &&
		  q->struct_size >= offsetof(weft_plan_query, device) + sizeof(q->device) &&
		  q->device.type != WEFT_DEVICE_CPU;
	out->rank = 0;
	out->numel = numel;
	out->working_grads = zero_grad_buffers(z, units) * 4 * w * max_chunk;
	out->bytes[WEFT_MEM_OPTIM] = 4 * slots * shard;
	switch (z->stage) {
	case 1:
		out->bytes[WEFT_MEM_PARAMS] = 4 * numel;
		out->bytes[WEFT_MEM_GRADS] = 4 * numel;
		out->bytes[WEFT_MEM_COMM] = 4 * w * max_chunk;
		out->collective_elements = 2 * w * chunk_sum;
		break;
	case 2:
		out->bytes[WEFT_MEM_PARAMS] = 4 * numel;
		out->bytes[WEFT_MEM_GRADS] = 4 * shard;
		out->bytes[WEFT_MEM_COMM] = 4 * w * max_chunk;
		out->collective_elements = (micro + 1) * w * chunk_sum;
		break;
	default:
		out->bytes[WEFT_MEM_PARAMS] = 4 * shard;
		out->bytes[WEFT_MEM_GRADS] = 4 * shard;
		out->working_params = zero_gather_buffers(z, gather_elems, gathered) * 4 *
				      gather_elems + persist_bytes;
		out->collective_elements = micro * 3 * w * (chunk_sum - persist_sum) +
					   (micro + 1) * w * persist_sum;
		/* setup's peak (zero_setup): the whole parameters (the model
		 * built without gradients) beside the shard and the persistent
		 * units taken from them, before they are freed */
		if (out->struct_size >= offsetof(weft_plan_result, setup_bytes) +
					sizeof(out->setup_bytes))
			out->setup_bytes = 4 * numel + 4 * shard + persist_bytes;
		break;
	}
	if (offload) {
		out->bytes[WEFT_MEM_OPTIM] = 4 * (slots + 1) * shard;
		out->host_bytes[WEFT_MEM_OPTIM] = out->bytes[WEFT_MEM_OPTIM];
		out->bytes[WEFT_MEM_GRADS] += 4 * shard;
		out->host_bytes[WEFT_MEM_GRADS] = 4 * shard;
	}
	out->moved_elements = out->collective_elements * (w - 1) / w;
	snprintf(out->layout, sizeof(out->layout), "ZeRO stage %d, %lld units, largest chunk %lld",
		 z->stage, (long long)units, (long long)max_chunk);
	psi = (double)numel;
	if (slots == 2) {
		snprintf(out->formula, sizeof(out->formula), "ZeRO paper, fp32 Adam: %s",
			 z->stage == 1 ? "8Psi + 8Psi/N" : z->stage == 2 ? "4Psi + 12Psi/N" :
			 "16Psi/N");
		out->formula_bytes = z->stage == 1 ? 8 * psi + 8 * psi / n :
				     z->stage == 2 ? 4 * psi + 12 * psi / n : 16 * psi / n;
	}
	if (w > 1)
		snprintf(out->comm_formula, sizeof(out->comm_formula),
			 "ZeRO paper: %s = %.0f per micro-batch",
			 z->stage == 3 ? "3Psi(N-1)/N" : "2Psi(N-1)/N",
			 (z->stage == 3 ? 3 : 2) * psi * (n - 1) / n);
	return WEFT_OK;
}
