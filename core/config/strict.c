/* Strictness: the first key nobody read, with a "did you mean". */
#include <stdio.h>
#include <string.h>

#include "base/edit_distance.h"
#include "config/config_impl.h"

const char *cfg_suggest(const char *word, const char *const *cands, size_t n)
{
	const char *best = NULL;
	size_t best_d = (size_t)-1;

	for (size_t i = 0; i < n; i++) {
		size_t la = strlen(word), lb = strlen(cands[i]);
		size_t longer = la > lb ? la : lb;
		/* about one edit in three: 'stratgy' -> 'strategy', not 'lr' -> 'xy' */
		size_t limit = (longer + 2) / 3;
		size_t d = weft_edit_distance(word, cands[i]);

		if (limit < 1)
			limit = 1;
		if (d <= limit && d < best_d) {
			best = cands[i];
			best_d = d;
		}
	}
	return best;
}

static weft_status report(const weft_cfg *entry)
{
	const weft_cfg *map = entry->parent;
	const char *near = cfg_suggest(entry->key, (const char *const *)map->asked, map->n_asked);
	char where[600], name[600], known[1024];
	size_t pos = 0;

	snprintf(where, sizeof(where), "%s:%u:%u", entry->key_file, entry->key_line,
		 entry->key_col);
	cfg_name(map, name, sizeof(name));
	if (near)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "%s: unknown key '%s' in %s (did you mean '%s'?)", where,
				      entry->key, name, near);
	if (!map->n_asked)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "%s: unknown key '%s' in %s (no key there is read by weft "
				      "or its plugins; remove it)",
				      where, entry->key, name);
	known[0] = '\0';
	for (size_t i = 0; i < map->n_asked && pos < sizeof(known); i++) {
		int w = snprintf(known + pos, sizeof(known) - pos, "%s%s", i ? ", " : "",
				 map->asked[i]);

		if (w < 0)
			break;
		pos += (size_t)w;
	}
	return weft_error_set(WEFT_ERR_CONFIG, "%s: unknown key '%s' in %s (known keys: %s)",
			      where, entry->key, name, known);
}

/* The first unread key under `node`, in document order. */
static weft_status walk(const weft_cfg *node)
{
	weft_status st;

	for (size_t i = 0; i < node->n; i++) {
		const weft_cfg *kid = node->kids[i];

		if (node->kind == WEFT_CFG_MAP && !kid->used)
			return report(kid);
		st = walk(kid);
		if (st != WEFT_OK)
			return st;
	}
	return WEFT_OK;
}

weft_status weft_config_check_unused(const weft_config *cfg)
{
	if (!cfg || !cfg->root)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "weft_config_check_unused: NULL config");
	return walk(cfg->root);
}
