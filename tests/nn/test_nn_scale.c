/* Model construction is linear in the number of parameter tensors (names
 * are hashed when declared), and a model that cannot fit in memory is
 * refused before anything is allocated, with the estimate and the fix.
 *
 * The timed case: a GPT of 4000 tiny blocks, 48,004 parameter tensors,
 * built (declared, allocated, initialised) and every tensor looked up by
 * name. Linear code does it in about 0.1 s (well under 1 s under ASan);
 * the name scan it replaces took 36 s on this shape. The bound, 8 s, leaves
 * a slow shared machine and the sanitizers room while still failing the
 * quadratic code by a wide margin.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "nn_test_util.h"

#define N_LAYER 4000
#define BOUND_S 8.0

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_many_tensors(void)
{
	weft_gpt_config c = { .n_layer = N_LAYER, .n_head = 1, .n_embd = 4, .vocab_size = 8,
			      .block_size = 4, .bias = 1 };
	weft_model *m = NULL;
	weft_params *ps;
	size_t n, found = 0;
	double t0, dt;

	t0 = now();
	WT_OK(weft_model_create_gpt(&c, NULL, &m));
	ps = weft_model_params(m);
	n = weft_params_count(ps);
	for (size_t i = 0; i < n; i++) {
		weft_tensor *p = weft_params_at(ps, i);

		found += weft_params_find(ps, p->name) == p;
	}
	dt = now() - t0;
	fprintf(stderr, "gpt of %d blocks, %zu parameter tensors: built and looked up in %.3f s "
		"(bound %.0f s)\n", N_LAYER, n, dt, BOUND_S);
	WT_CHECK(n == 12 * (size_t)N_LAYER + 4);
	WT_CHECK(found == n);
	WT_CHECK(weft_params_find(ps, "transformer.h.3999.mlp.c_fc.weight") != NULL);
	WT_CHECK(weft_params_find(ps, "transformer.h.4000.mlp.c_fc.weight") == NULL);
	WT_CHECK(weft_model_module_find(m, "transformer.h.1234.attn") != NULL);
	WT_CHECK(dt < BOUND_S);
	weft_model_free(m);
}

/* Names stay unique with the index too. */
static void test_duplicate_name(void)
{
	int64_t shape[1] = { 3 };
	weft_device cpu = { .type = WEFT_DEVICE_CPU };
	weft_params *ps = NULL;
	weft_tensor *t;
	char name[32];

	WT_OK(weft_params_create(cpu, &ps));
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "p%d", i);
		WT_OK(weft_params_add(ps, name, WEFT_F32, 1, shape, &t));
	}
	WT_FAILS(weft_params_add(ps, "p57", WEFT_F32, 1, shape, &t), WEFT_ERR_INVALID_ARG,
		 "parameter 'p57' is declared twice");
	WT_CHECK(weft_params_find(ps, "p99") == weft_params_at(ps, 99));
	WT_CHECK(weft_params_find(ps, "p100") == NULL);
	weft_params_free(ps);
}

/* A model far past the machine's memory: refused before allocating, with
 * the estimate, what is available and what to change. (Without the
 * estimate the allocation either fails late or the kernel's overcommit
 * lets the zeroing run the machine out of memory.) */
static void test_too_big(void)
{
	/* 50304 x 2^20 embedding alone: 211 GB of parameters, twice with grads */
	weft_gpt_config c = { .n_layer = 1, .n_head = 1, .n_embd = 1 << 20, .vocab_size = 50304,
			      .block_size = 4, .bias = 1 };
	weft_mlp_config mc = { .in_features = 1 << 20, .n_hidden = 1, .hidden = { 1 << 20 },
			       .out_features = 10 };
	weft_model *m = NULL;

	WT_FAILS(weft_model_create_gpt(&c, NULL, &m), WEFT_ERR_NOMEM, "parameters",
		 "GiB", "available", "smaller model");
	WT_CHECK(m == NULL);
	WT_FAILS(weft_model_create_mlp(&mc, NULL, &m), WEFT_ERR_NOMEM, "GiB", "available");
	WT_CHECK(m == NULL);
}

int main(void)
{
	test_duplicate_name();
	test_too_big();
	test_many_tensors();
	return wt_done("test_nn_scale");
}
