/* Helpers shared by the core/config tests. */
#ifndef CFG_TEST_UTIL_H
#define CFG_TEST_UTIL_H

#include <string.h>

#include "weft/config.h"
#include "weft_test.h"

/* Parses a literal as "cfg.yaml"; the test stops if it fails. */
static inline weft_config *load(const char *text)
{
	weft_config *cfg = NULL;

	WT_OK(weft_config_load_string("cfg.yaml", text, strlen(text), &cfg));
	return cfg;
}

/* Loads a literal that should not parse; returns the status (the message
 * is the last error) and checks nothing was handed out. */
static inline weft_status load_err(const char *text)
{
	weft_config *cfg = NULL;
	weft_status st = weft_config_load_string("cfg.yaml", text, strlen(text), &cfg);

	WT_CHECK(st == WEFT_OK || cfg == NULL);
	weft_config_free(cfg);
	return st;
}

/* The node at a dotted path of mapping keys / sequence indices, reading
 * (and so marking) every key on the way. */
static inline const weft_cfg *at_path(const weft_config *cfg, const char *path)
{
	const weft_cfg *node = weft_config_root(cfg);
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *seg = strtok_r(buf, ".", &save); seg && node; seg = strtok_r(NULL, ".", &save)) {
		if (weft_cfg_kind_of(node) == WEFT_CFG_SEQ)
			node = weft_cfg_at(node, (size_t)strtoul(seg, NULL, 10));
		else
			node = weft_cfg_get(node, seg);
	}
	return node;
}

static inline const char *where(const weft_cfg *node)
{
	static char buf[256];

	return weft_cfg_where(node, buf, sizeof(buf));
}

static inline const char *path_of(const weft_cfg *node)
{
	static char buf[256];

	return weft_cfg_path(node, buf, sizeof(buf));
}

/* Same kinds, texts, keys and order all the way down. */
static inline int same_tree(const weft_cfg *a, const weft_cfg *b)
{
	size_t n = weft_cfg_size(a);

	if (weft_cfg_kind_of(a) != weft_cfg_kind_of(b) || n != weft_cfg_size(b))
		return 0;
	if (weft_cfg_kind_of(a) == WEFT_CFG_SCALAR)
		return strcmp(weft_cfg_scalar(a), weft_cfg_scalar(b)) == 0;
	for (size_t i = 0; i < n; i++) {
		if (weft_cfg_kind_of(a) == WEFT_CFG_MAP &&
		    strcmp(weft_cfg_key_at(a, i), weft_cfg_key_at(b, i)) != 0)
			return 0;
		if (!same_tree(weft_cfg_at(a, i), weft_cfg_at(b, i)))
			return 0;
	}
	return 1;
}

#endif /* CFG_TEST_UTIL_H */
