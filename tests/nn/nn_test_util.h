/* Helpers shared by the nn tests (and the trainer's Hugging Face tests):
 * fixture paths, golden files, a model from init_from, weights compared
 * exactly, and element-wise comparison with a written-down tolerance. */
#ifndef WEFT_NN_TEST_UTIL_H
#define WEFT_NN_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/autograd.h"
#include "weft/config.h"
#include "weft/module.h"
#include "weft/ops.h"
#include "weft/tensor.h"
#include "nn/safetensors.h"
#include "weft_test.h"

/* "$WEFT_SOURCE_DIR/tests/fixtures/models/<file>" into buf. */
static inline const char *fixture(const char *file, char *buf, size_t len)
{
	const char *src = getenv("WEFT_SOURCE_DIR");

	snprintf(buf, len, "%s/tests/fixtures/models/%s", src ? src : ".", file);
	return buf;
}

/* A scratch path in the test's working directory (the build's tests/). */
static inline const char *scratch(const char *file, char *buf, size_t len)
{
	snprintf(buf, len, "nn_scratch_%s", file);
	return buf;
}

/* A new host tensor holding a copy of golden tensor `name` (aligned,
 * unlike the file's bytes). Free with weft_tensor_free. */
static inline weft_tensor *golden_tensor(const weft_st_file *f, const char *name)
{
	const weft_st_tensor *t = weft_st_find(f, name);
	weft_tensor *out;

	WT_REQUIRE(t != NULL);
	WT_OK(weft_tensor_alloc(name, t->dtype, t->ndim, t->shape, WEFT_CPU, WEFT_MEM_OTHER, &out));
	WT_OK(weft_tensor_copy_from_host(out, t->data, (size_t)(t->end - t->begin)));
	return out;
}

/* Builds the model of fixture case `name` (<name>.yaml with init_from
 * pointed at the fixture's weights). */
static inline weft_model *fixture_model(const char *name, const weft_model_options *opt)
{
	char path[1024], ovr[1200], file[256];
	weft_config *cfg;
	weft_model *m;

	snprintf(file, sizeof(file), "%s.yaml", name);
	WT_OK(weft_config_load_file(fixture(file, path, sizeof(path)), &cfg));
	snprintf(file, sizeof(file), "%s_weights.safetensors", name);
	snprintf(ovr, sizeof(ovr), "model.init_from=%s", fixture(file, path, sizeof(path)));
	WT_OK(weft_config_override(cfg, ovr));
	WT_OK(weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"), opt, &m));
	WT_OK(weft_config_check_unused(cfg));
	weft_config_free(cfg);
	return m;
}

/* The model of `model: {class: gpt, KEYS init_from: FROM}` (keys: more of
 * the section, each followed by ", ", or ""). Free with weft_model_free. */
static inline weft_model *model_init_from(const char *keys, const char *from)
{
	char yaml[4096];
	weft_config *cfg;
	weft_model *m = NULL;

	snprintf(yaml, sizeof(yaml), "model: {class: gpt, %sinit_from: '%s'}\n", keys, from);
	WT_OK(weft_config_load_string("m.yaml", yaml, strlen(yaml), &cfg));
	WT_OK(weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"), NULL, &m));
	weft_config_free(cfg);
	return m;
}

/* Whether two models hold the same parameters: names, sizes and bytes, in
 * order. */
static inline int same_weights(const weft_model *a, const weft_model *b)
{
	const weft_params *pa = weft_model_params(a), *pb = weft_model_params(b);

	if (weft_params_count(pa) != weft_params_count(pb))
		return 0;
	for (size_t i = 0; i < weft_params_count(pa); i++) {
		const weft_tensor *x = weft_params_at(pa, i), *y = weft_params_at(pb, i);

		if (strcmp(x->name, y->name) || weft_tensor_nbytes(x) != weft_tensor_nbytes(y) ||
		    memcmp(x->data, y->data, weft_tensor_nbytes(x)))
			return 0;
	}
	return 1;
}

/* Largest |a - b| / (atol + rtol |b|) over n floats (<= 1 passes); the
 * index of the worst element in *worst. */
static inline double worst_ratio(const float *a, const float *b, int64_t n, double rtol,
				 double atol, int64_t *worst)
{
	double r = 0;

	*worst = 0;
	for (int64_t i = 0; i < n; i++) {
		double e = fabs((double)a[i] - (double)b[i]) / (atol + rtol * fabs((double)b[i]));

		if (!(e <= r)) {
			r = e;
			*worst = i;
		}
	}
	return r;
}

/* Checks every element of `got` (numel n) against `want` within
 * |got - want| <= atol + rtol |want|, reporting the worst one. */
#define CHECK_ALL_CLOSE(what, got, want, n, rtol, atol)                                  \
	do {                                                                             \
		int64_t w_;                                                              \
		double r_ = worst_ratio((got), (want), (n), (rtol), (atol), &w_);        \
		wt_checks++;                                                             \
		if (!(r_ <= 1.0)) {                                                      \
			wt_failures++;                                                   \
			fprintf(stderr, "%s:%d: %s: element %lld is %.9g, want %.9g "    \
				"(rtol %g, atol %g)\n", __FILE__, __LINE__, (what),      \
				(long long)w_, (double)(got)[w_], (double)(want)[w_],     \
				(double)(rtol), (double)(atol));                         \
		}                                                                        \
	} while (0)

#endif /* WEFT_NN_TEST_UTIL_H */
