/* optim_test.h - helpers shared by the optimizer tests: loading the
 * built-in optimizer plugin through the registry, parsing a config from a
 * string, and reading the PyTorch fixtures (tests/fixtures/optim). */
#ifndef WEFT_TESTS_OPTIM_TEST_H
#define WEFT_TESTS_OPTIM_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/config.h"
#include "weft/memory.h"
#include "weft/optim.h"
#include "plugin/registry.h"
#include "weft_test.h"

static weft_registry *ot_registry;

/* The optimizer vtable named `name` from optim_builtin.so in the build's
 * plugin directory (WEFT_PLUGIN_DIR, set by ctest). */
static inline const weft_optim_ops *ot_find(const char *name)
{
	const void *vt = NULL;

	if (!ot_registry) {
		const char *dir = getenv("WEFT_PLUGIN_DIR");
		char path[4096];

		WT_REQUIRE(dir != NULL);
		snprintf(path, sizeof(path), "%s/optim_builtin.so", dir);
		WT_OK(weft_registry_create(&ot_registry));
		WT_OK(weft_registry_add_file(ot_registry, path));
	}
	WT_OK(weft_registry_find(ot_registry, WEFT_PLUGIN_OPTIM, name, &vt, NULL));
	return vt;
}

static inline void ot_release(void)
{
	weft_registry_free(ot_registry);
	ot_registry = NULL;
}

/* Loads YAML text as "cfg.yaml" (the name messages show). */
static inline weft_config *ot_config(const char *yaml)
{
	weft_config *cfg = NULL;

	WT_OK(weft_config_load_string("cfg.yaml", yaml, strlen(yaml), &cfg));
	return cfg;
}

/* Path of a fixture file under the source tree (WEFT_SOURCE_DIR). */
static inline void ot_fixture_path(char *buf, size_t len, const char *file)
{
	const char *src = getenv("WEFT_SOURCE_DIR");

	WT_REQUIRE(src != NULL);
	snprintf(buf, len, "%s/tests/fixtures/optim/%s", src, file);
}

/* ---- optimizer fixtures -------------------------------------------- */

#define OT_MAX_TENSORS 8
#define OT_MAX_STEPS 32
#define OT_MAX_SLOTS 4

typedef struct ot_case {
	char config[512];
	size_t ntensors;
	char names[OT_MAX_TENSORS][64];
	weft_optim_segment segs[OT_MAX_TENSORS];
	int decay_ref[OT_MAX_TENSORS];
	int64_t total;
	float *init;
	int nsteps;
	double lr[OT_MAX_STEPS];
	float *grad[OT_MAX_STEPS];
	float *param[OT_MAX_STEPS];
	size_t nslots;
	char slot_names[OT_MAX_SLOTS][32];
	float *slot[OT_MAX_STEPS][OT_MAX_SLOTS];
} ot_case;

/* total floats from the text after a record keyword; malloc'ed. */
static inline float *ot_floats(char *text, int64_t total)
{
	float *out = malloc((size_t)total * sizeof(float));
	char *end;

	WT_REQUIRE(out != NULL);
	for (int64_t i = 0; i < total; i++) {
		out[i] = strtof(text, &end);
		WT_REQUIRE(end != text);
		text = end;
	}
	return out;
}

static inline void ot_case_load(const char *file, ot_case *c)
{
	char path[4096];
	char *line = NULL;
	size_t cap = 0;
	FILE *f;

	memset(c, 0, sizeof(*c));
	ot_fixture_path(path, sizeof(path), file);
	f = fopen(path, "r");
	if (!f)
		fprintf(stderr, "cannot open fixture %s\n", path);
	WT_REQUIRE(f != NULL);
	while (getline(&line, &cap, f) > 0) {
		char *rest = strchr(line, ' ');

		if (line[0] == '#' || !rest)
			continue;
		*rest++ = '\0';
		rest[strcspn(rest, "\n")] = '\0';
		if (!strcmp(line, "config")) {
			snprintf(c->config, sizeof(c->config), "optimizer: %s\n", rest);
		} else if (!strcmp(line, "tensor")) {
			size_t t = c->ntensors++;
			int ndim, decay;
			long long numel;

			WT_REQUIRE(t < OT_MAX_TENSORS);
			WT_REQUIRE(sscanf(rest, "%63s %d %lld %d", c->names[t], &ndim, &numel,
					  &decay) == 4);
			c->segs[t] = (weft_optim_segment){ .name = c->names[t], .offset = c->total,
							   .numel = numel, .ndim = ndim };
			c->decay_ref[t] = decay;
			c->total += numel;
		} else if (!strcmp(line, "init")) {
			c->init = ot_floats(rest, c->total);
		} else if (!strcmp(line, "step")) {
			int k;

			WT_REQUIRE(sscanf(rest, "%d %lf", &k, &c->lr[c->nsteps]) == 2);
			WT_REQUIRE(k == c->nsteps + 1 && c->nsteps < OT_MAX_STEPS);
			c->nsteps++;
		} else if (!strcmp(line, "grad")) {
			c->grad[c->nsteps - 1] = ot_floats(rest, c->total);
		} else if (!strcmp(line, "param")) {
			c->param[c->nsteps - 1] = ot_floats(rest, c->total);
		} else if (!strcmp(line, "slot")) {
			char *vals = strchr(rest, ' ');
			size_t k = 0;

			WT_REQUIRE(vals != NULL);
			*vals++ = '\0';
			while (k < c->nslots && strcmp(c->slot_names[k], rest))
				k++;
			if (k == c->nslots) {
				WT_REQUIRE(c->nslots < OT_MAX_SLOTS);
				snprintf(c->slot_names[c->nslots++], sizeof(c->slot_names[0]), "%s",
					 rest);
			}
			c->slot[c->nsteps - 1][k] = ot_floats(vals, c->total);
		}
	}
	free(line);
	fclose(f);
	WT_REQUIRE(c->init && c->nsteps > 0);
}

static inline void ot_case_free(ot_case *c)
{
	free(c->init);
	for (int s = 0; s < c->nsteps; s++) {
		free(c->grad[s]);
		free(c->param[s]);
		for (size_t k = 0; k < c->nslots; k++)
			free(c->slot[s][k]);
	}
}

#endif /* WEFT_TESTS_OPTIM_TEST_H */
