/* example_test.h - the steps the examples' tests share
 * (test_train_gpt_example, test_train_llama_bpe_example): an example
 * config's data, and its `weft fit` run's summary. Header-only, after
 * train_test.h. */
#ifndef WEFT_TESTS_EXAMPLE_TEST_H
#define WEFT_TESTS_EXAMPLE_TEST_H

#include "base/json.h"
#include "train_test.h"
#include "weft/config.h"
#include "weft/status.h"

/* Loads examples/NAME.yaml of $WEFT_SOURCE_DIR (its path into cfg_path,
 * TT_PATH bytes) into *cfg and reads its data.paths (up to max; they
 * belong to *cfg) and data.val_fraction (0.1 when absent). Returns 1; 0
 * when one of the paths is missing, having said so and freed *cfg: the
 * test then skips (exit 77). */
static inline int tt_example_data(const char *name, char *cfg_path, weft_config **cfg,
				  const char **paths, size_t max, size_t *n, double *vf)
{
	const char *src = getenv("WEFT_SOURCE_DIR");
	const weft_cfg *data, *list;

	WT_REQUIRE(src);
	snprintf(cfg_path, TT_PATH, "%s/examples/%s.yaml", src, name);
	WT_OK(weft_config_load_file(cfg_path, cfg));
	data = weft_cfg_get(weft_config_root(*cfg), "data");
	list = weft_cfg_get(data, "paths");
	WT_REQUIRE(list && weft_cfg_kind_of(list) == WEFT_CFG_SEQ);
	*vf = 0.1;
	WT_OK(weft_cfg_float(data, "val_fraction", 0.1, vf));
	*n = 0;
	for (size_t i = 0; i < weft_cfg_size(list) && *n < max; i++) {
		WT_OK(weft_cfg_as_str(weft_cfg_at(list, i), &paths[*n]));
		if (!tt_exists(paths[*n])) {
			printf("skipped: %s is missing (apt-get install fortunes-min fortunes)\n",
			       paths[*n]);
			weft_config_free(*cfg);
			*cfg = NULL;
			return 0;
		}
		(*n)++;
	}
	return 1;
}

/* After run `tag` of `weft fit` on example NAME exited with rc (required
 * 0): its runs/NAME/version_0/summary.json into *sum (free with
 * weft_json_free) and its final val_loss (required). */
static inline double tt_example_val_loss(const char *tag, int rc, const char *name,
					 weft_json_value **sum)
{
	const weft_json_value *fm, *vl;

	WT_REQUIRE(tt_expect_ok(tag, rc));
	WT_OK(weft_json_parse_file(tt_path("runs/%s/version_0/summary.json", name), sum));
	fm = weft_json_get(*sum, "final_metrics");
	vl = fm ? weft_json_get(fm, "val_loss") : NULL;
	WT_REQUIRE(vl && vl->kind == WEFT_JSON_NUMBER);
	return vl->number;
}

#endif /* WEFT_TESTS_EXAMPLE_TEST_H */
