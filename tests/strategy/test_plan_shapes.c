/* weft plan from declared shapes (nn/shapes.h) against the plan of the
 * built model:
 * - for single, ddp, zero_1/2/3, tp, pp and hybrid at 2 and 3 ranks on
 *   two GPT shapes and an MLP, for every rank's model (its pipeline stage,
 *   its tensor-parallel shard): the parameter list (names, dtypes, shapes,
 *   flat offsets) is equal and the shapes-only model holds no parameter
 *   storage; the strategy's plan (every category, the working sets, the
 *   collective counts, the layout and formula lines, tp splits through
 *   the host) is equal byte for byte wherever it plans that rank (the
 *   planning env is rank 0's: tp and pp refuse another rank's model, from
 *   its shapes with the same error);
 * - llama3-8b (8,030,261,248 parameters) plans under zero_3 on 2 ranks
 *   from its shapes in under 2 s of CPU time (built, it would allocate and
 *   initialise 32 GB; measured 0.001 s), and its bytes are the paper's
 *   16 Psi / N to the byte plus nothing the model holds;
 * - a shapes-only model refuses to run (one message saying what it is). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nn/shapes.h"
#include "plan/plan.h"
#include "weft/config.h"
#include "weft/module.h"
#include "weft/ops.h"
#include "weft/status.h"
#include "weft_test.h"

static const char *const models[] = {
	"{class: gpt, n_layer: 4, n_head: 6, n_embd: 48, vocab_size: 96, block_size: 16, "
	"bias: true}",
	"{class: gpt, n_layer: 5, n_head: 6, n_embd: 36, vocab_size: 66, block_size: 12, "
	"bias: false}",
	"{class: mlp, in_features: 12, hidden: [20, 16], out_features: 6}",
};

static const char *const strategies[] = {
	"single", "ddp", "zero_1", "zero_2", "zero_3",
	"{name: zero_3, stage3_param_persistence_threshold: 0}", "tp", "{name: pp, schedule: 1f1b, partition: parameters}",
	"{name: hybrid, dp: 1, pp: WORLD, partition: parameters}",
};

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static weft_config *config_of(const char *strategy, int world, const char *model)
{
	char text[1024], strat[256];
	const char *w = strstr(strategy, "WORLD");
	weft_config *cfg = NULL;

	if (w)
		snprintf(strat, sizeof(strat), "%.*s%d%s", (int)(w - strategy), strategy, world,
			 w + 5);
	else
		snprintf(strat, sizeof(strat), "%s", strategy);
	snprintf(text, sizeof(text), "{trainer: {devices: %d, strategy: %s}, model: %s}", world,
		 strat, model);
	WT_OK(weft_config_load_string("plan", text, strlen(text), &cfg));
	return cfg;
}

/* 1 when the strategy cannot serve this model at this world (tp and pp
 * need a GPT; tp needs heads, width and vocabulary divisible by the
 * world); the plan then errs the same way built or not. */
static int skip(const char *strategy, int world, int mi)
{
	if (!strcmp(strategy, "single"))
		return world != 1;
	if (world < 2)
		return 1;
	if (mi == 2)
		return !strncmp(strategy, "tp", 2) || strstr(strategy, "pp") != NULL;
	return 0;
}

static void same_params(const weft_params *a, const weft_params *b)
{
	WT_CHECK(weft_params_count(a) == weft_params_count(b));
	for (size_t i = 0; i < weft_params_count(a); i++) {
		const weft_tensor *x = weft_params_at(a, i), *y = weft_params_at(b, i);

		WT_CHECK(!strcmp(x->name, y->name));
		WT_CHECK(x->dtype == y->dtype && x->ndim == y->ndim);
		WT_CHECK(!memcmp(x->shape, y->shape, sizeof(x->shape[0]) * (size_t)x->ndim));
		WT_CHECK(x->offset == y->offset);
		WT_CHECK(x->data != NULL && y->data == NULL);
	}
}

static int planned;

static void one(const char *strategy, int world, int mi)
{
	weft_config *cfg = config_of(strategy, world, models[mi]);
	const weft_cfg *root = weft_config_root(cfg);
	weft_plan_opts o;

	WT_OK(weft_plan_opts_from_config(root, 0, &o));
	o.n_slots = 2;
	for (int r = 0; r < world; r++) {
		weft_model_options mo = { .device = WEFT_CPU, .seed = 3, .no_grads = 1 };
		weft_model *built = NULL, *shapes = NULL;
		weft_plan pb, ps;
		weft_status sb;
		char why[1024];

		WT_OK(weft_plan_model_options_rank(&o, r, &mo));
		WT_OK(weft_model_from_config(weft_cfg_get(root, "model"), &mo, &built));
		WT_OK(nn_model_shapes_from_config(weft_cfg_get(root, "model"), &mo, &shapes));
		WT_CHECK(nn_model_is_shapes_only(shapes) && !nn_model_is_shapes_only(built));
		same_params(weft_model_params(built), weft_model_params(shapes));
		/* the planning env is rank 0's: tp and pp refuse another rank's
		 * model, and must refuse it the same way from its shapes */
		sb = weft_plan_compute(weft_model_params(built), &o, &pb);
		snprintf(why, sizeof(why), "%s", sb ? weft_error_last() : "");
		WT_CHECK(weft_plan_compute(weft_model_params(shapes), &o, &ps) == sb);
		if (sb) {
			if (!(r > 0 && !strcmp(why, weft_error_last())))
				fprintf(stderr, "%s, %d ranks, model %d, rank %d: built: %s; "
					"shapes: %s\n", strategy, world, mi, r, why,
					weft_error_last());
			WT_CHECK(r > 0 && !strcmp(why, weft_error_last()));
			weft_model_free(built);
			weft_model_free(shapes);
			continue;
		}
		planned++;
		/* both zero-filled by weft_plan_compute, then written field by
		 * field: equal bytes are equal plans */
		if (memcmp(&pb, &ps, sizeof(pb))) {
			fprintf(stderr, "%s, %d ranks, model %d, rank %d: the plans differ\n",
				strategy, world, mi, r);
			WT_CHECK(0);
		}
		WT_CHECK(pb.numel > 0 && pb.bytes[WEFT_MEM_PARAMS] > 0);
		weft_model_free(built);
		weft_model_free(shapes);
	}
	weft_config_free(cfg);
}

static void llama3_8b(void)
{
	const char *text = "{trainer: {devices: 2, strategy: zero_3}, model: {preset: llama3-8b}}";
	weft_config *cfg = NULL;
	weft_model_options mo = { .device = WEFT_CPU, .no_grads = 1 };
	weft_model *m = NULL;
	weft_plan_opts o;
	weft_plan p;
	double t0 = cpu_seconds(), dt;

	WT_OK(weft_config_load_string("plan", text, strlen(text), &cfg));
	WT_OK(weft_plan_opts_from_config(weft_config_root(cfg), 0, &o));
	o.n_slots = 2;
	WT_OK(weft_plan_model_options(&o, &mo));
	WT_OK(nn_model_shapes_from_config(weft_cfg_get(weft_config_root(cfg), "model"), &mo, &m));
	WT_OK(weft_plan_compute(weft_model_params(m), &o, &p));
	dt = cpu_seconds() - t0;
	printf("llama3-8b, zero_3 on 2 ranks: planned in %.3f s of CPU time; Psi %lld, "
	       "params + grads + optim %lld B per rank\n", dt, (long long)p.numel,
	       (long long)(p.bytes[WEFT_MEM_PARAMS] + p.bytes[WEFT_MEM_GRADS] +
			   p.bytes[WEFT_MEM_OPTIM]));
	WT_CHECK(dt < 2.0);
	WT_CHECK(p.numel == 8030261248LL);
	/* 16 Psi / N, plus the padding of units that do not split evenly: at
	 * most one element per unit and rank (a few hundred units) */
	WT_CHECK(p.bytes[WEFT_MEM_PARAMS] + p.bytes[WEFT_MEM_GRADS] + p.bytes[WEFT_MEM_OPTIM] >=
		 (int64_t)p.formula_bytes);
	WT_CHECK(p.bytes[WEFT_MEM_PARAMS] + p.bytes[WEFT_MEM_GRADS] + p.bytes[WEFT_MEM_OPTIM] -
		 (int64_t)p.formula_bytes < 16 * 1000);
	weft_model_free(m);
	weft_config_free(cfg);
}

/* A model of shapes only cannot run: its forward refuses. */
static void refuses_to_run(void)
{
	const char *text = "{model: {class: gpt, n_layer: 1, n_head: 2, n_embd: 8, vocab_size: 16, "
			   "block_size: 4}}";
	weft_config *cfg = NULL;
	weft_model *m = NULL;
	weft_ctx *ctx = NULL;
	weft_tensor *ids = NULL, *out = NULL;
	int64_t shape[2] = { 1, 4 };

	WT_OK(weft_config_load_string("shapes", text, strlen(text), &cfg));
	WT_OK(nn_model_shapes_from_config(weft_cfg_get(weft_config_root(cfg), "model"),
					  &(weft_model_options){ .device = WEFT_CPU }, &m));
	WT_OK(weft_ctx_create(&(weft_ctx_options){ .device = WEFT_CPU }, &ctx));
	WT_OK(weft_tensor_alloc("ids", WEFT_I64, 2, shape, WEFT_CPU, WEFT_MEM_OTHER, &ids));
	memset(ids->data, 0, 4 * sizeof(int64_t));
	WT_CHECK(weft_model_forward(m, ctx, ids, &out) == WEFT_ERR_INVALID_ARG);
	WT_STR_CONTAINS(weft_error_last(), "shapes only");
	weft_tensor_free(ids);
	weft_ctx_free(ctx);
	weft_model_free(m);
	weft_config_free(cfg);
}

int main(void)
{
	for (size_t s = 0; s < sizeof(strategies) / sizeof(strategies[0]); s++)
		for (int world = 1; world <= 3; world++)
			for (int mi = 0; mi < 3; mi++)
				if (!skip(strategies[s], world, mi))
					one(strategies[s], world, mi);
	printf("%d rank models planned equal from shapes and built\n", planned);
	WT_CHECK(planned >= 60);
	llama3_8b();
	refuses_to_run();
	return wt_done("test_plan_shapes");
}
