/* The plan against a memory budget (plan_budget.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plan/plan_budget.h"

static const struct unit {
	const char *name;
	double scale;
} units[] = {
	{ "", 1 },          { "b", 1 },          { "kb", 1e3 },       { "mb", 1e6 },
	{ "gb", 1e9 },      { "tb", 1e12 },      { "kib", 1024.0 },   { "mib", 1048576.0 },
	{ "gib", 1073741824.0 }, { "tib", 1099511627776.0 },
};

weft_status weft_plan_parse_bytes(const char *what, const char *text, int64_t *out)
{
	const char *s = text ? text : "";
	char *end;
	double v;

	while (isspace((unsigned char)*s))
		s++;
	v = strtod(s, &end);
	if (end != s && isfinite(v) && v > 0) {
		while (*end == ' ')
			end++;
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			if (strcasecmp(end, units[i].name))
				continue;
			v *= units[i].scale;
			if (v >= 1 && v < 9.0e18) {
				*out = (int64_t)v;
				return WEFT_OK;
			}
		}
	}
	return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: '%s' is not a memory size; give a "
			      "positive number of bytes with an optional unit, B, KB, MB, GB, TB "
			      "(powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g. 80GB",
			      what, text ? text : "");
}

int64_t weft_plan_rank_total(const weft_plan *p, const weft_plan_act *act)
{
	int64_t t = p->working_params + p->working_grads + p->comm_backend_bytes;

	for (int c = 0; c < WEFT_MEM_NUM_CATEGORIES; c++)
		t += p->bytes[c];
	if (act && act->predicted)
		t += act->bytes;
	/* setup holds no activations; its peak counts when it is the larger */
	if (p->setup_bytes + p->comm_backend_bytes > t)
		t = p->setup_bytes + p->comm_backend_bytes;
	return t;
}

/* A byte count for the verdict: GiB, MiB or KiB with two decimals. */
typedef struct human {
	char s[32];
} human;

static human hb(int64_t b)
{
	human h;
	double v = (double)b;

	if (v >= 1073741824.0)
		snprintf(h.s, sizeof(h.s), "%.2f GiB", v / 1073741824.0);
	else if (v >= 1048576.0)
		snprintf(h.s, sizeof(h.s), "%.2f MiB", v / 1048576.0);
	else
		snprintf(h.s, sizeof(h.s), "%.2f KiB", v / 1024.0);
	return h;
}

/* The ZeRO stage a run of o is at: 0 for ddp/single/fsdp-less names, 1-3
 * for zero_N (and deepspeed's stage names), -1 where the ZeRO formulas do
 * not apply (tp, pp, hybrid, dp). */
static int zero_stage(const char *s)
{
	if (!strcmp(s, "ddp") || !strcmp(s, "single"))
		return 0;
	if (!strncmp(s, "zero_", 5) && s[5] >= '1' && s[5] <= '3' && !s[6])
		return s[5] - '0';
	if (!strncmp(s, "deepspeed_stage_", 16) && s[16] >= '1' && s[16] <= '3')
		return s[16] - '0';
	return -1;
}

/* params + grads + optim per rank at ZeRO stage k (0: replicated) for psi
 * fp32 elements, `slots` state slots, n ranks (the paper's formulas). */
static int64_t zero_bytes(int k, int64_t psi, int64_t slots, int64_t n)
{
	int64_t o = 4 * slots * psi;

	switch (k) {
	case 0:
		return 8 * psi + o;
	case 1:
		return 8 * psi + o / n;
	case 2:
		return 4 * psi + (4 * psi + o) / n;
	default:
		return (8 * psi + o) / n;
	}
}

int weft_plan_verdict(const weft_plan_opts *o, const weft_plan *p, const weft_plan_act *act,
		      const weft_plan_alt *alt, int64_t budget, char *buf, size_t n)
{
	int64_t total = weft_plan_rank_total(p, act);
	int64_t core = p->bytes[WEFT_MEM_PARAMS] + p->bytes[WEFT_MEM_GRADS] +
		       p->bytes[WEFT_MEM_OPTIM];
	int64_t a = act && act->predicted ? act->bytes : 0, rest = total - core - a;
	int64_t best_core = core, best_act = a;
	int k = zero_stage(o->strategy), world = o->world > 0 ? o->world : 1;
	char fix[512] = "";
	size_t used = 0;
	int w;

	if (total <= budget) {
		snprintf(buf, n, "rank %d fits: %s of the %s budget (%.0f%%; every "
			 "rank holds at most this)%s", (int)p->rank, hb(total).s, hb(budget).s,
			 100.0 * (double)total / (double)budget,
			 act && act->predicted ? "" : ", activations not included");
		return 1;
	}
	/* one change alone: the lowest ZeRO stage, then checkpointing, then
	 * the largest micro-batch */
	if (k >= 0 && world > 1)
		for (int s = k + 1; s <= 3; s++) {
			int64_t c = zero_bytes(s, p->numel, (int64_t)o->n_slots, world);

			if (c < best_core)
				best_core = c;
			if (!used && c + a + rest <= budget) {
				w = snprintf(fix, sizeof(fix), "change trainer.strategy: zero_%d (%s)",
					     s, hb(c + a + rest).s);
				used = w > 0 ? (size_t)w : 0;
			}
		}
	if (!used && alt && alt->act_full && alt->act_full->predicted && act && act->predicted) {
		best_act = alt->act_full->bytes < best_act ? alt->act_full->bytes : best_act;
		if (core + alt->act_full->bytes + rest <= budget) {
			w = snprintf(fix, sizeof(fix), "change trainer.activation_checkpointing: "
				     "full (%s)", hb(core + alt->act_full->bytes + rest).s);
			used = w > 0 ? (size_t)w : 0;
		}
	}
	if (!used && act && act->predicted)
		for (int64_t b = act->micro_batch - 1; b >= 1; b--) {
			int64_t ab = weft_plan_act_bytes_at(act, b);

			if (core + ab + rest <= budget) {
				w = snprintf(fix, sizeof(fix), "change data.batch_size: %lld, with "
					     "trainer.accumulate_grad_batches to keep the batch "
					     "(%s)", (long long)b, hb(core + ab + rest).s);
				used = w > 0 ? (size_t)w : 0;
				break;
			}
		}
	if (!used) {
		/* all together: the smallest core, checkpointing's activations
		 * scaled to micro-batch 1 */
		int64_t a1 = best_act;

		if (act && act->predicted && act->micro_batch > 1)
			a1 = (int64_t)((double)best_act *
				       (double)weft_plan_act_bytes_at(act, 1) /
				       (double)(a ? a : 1));
		if (best_core + a1 + rest <= budget)
			snprintf(fix, sizeof(fix), "change %s%s%s together (%s)",
				 best_core < core ? "trainer.strategy: zero_3, " : "",
				 best_act < a ? "trainer.activation_checkpointing: full, " : "",
				 "data.batch_size: 1", hb(best_core + a1 + rest).s);
		else
			snprintf(fix, sizeof(fix), "no change fits it: even with %s%s%s a rank "
				 "needs %s; use more ranks (--world-size) with zero_3, or a "
				 "smaller model", k >= 0 && world > 1 && k < 3 ? "zero_3" : "the "
				 "strategy as it is", best_act < a ? ", full checkpointing" : "",
				 act && act->predicted ? ", data.batch_size: 1" : "",
				 hb(best_core + a1 + rest).s);
	}
	snprintf(buf, n, "rank %d does not fit: %s of the %s budget (params + grads "
		 "+ optim %s, activations %s%s, comm and working sets %s); %s",
		 (int)p->rank, hb(total).s, hb(budget).s, hb(core).s,
		 act && act->predicted ? "" : "not predicted ", hb(a).s, hb(rest).s, fix);
	return 0;
}
