/* Strictness: the first key nobody read, with a "did you mean". */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "config/config_impl.h"

size_t cfg_distance(const char *a, const char *b)
{
	size_t rows[3][WEFT_CFG_MAX_SUGGEST_LEN + 1];
	size_t la = strlen(a), lb = strlen(b);
	size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2];

	if (la > WEFT_CFG_MAX_SUGGEST_LEN || lb > WEFT_CFG_MAX_SUGGEST_LEN)
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		int ca = tolower((unsigned char)a[i - 1]);
		size_t *t;

		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			int cb = tolower((unsigned char)b[j - 1]);
			size_t best = prev[j - 1] + (ca != cb);

			if (prev[j] + 1 < best)
				best = prev[j] + 1;
			if (cur[j - 1] + 1 < best)
				best = cur[j - 1] + 1;
			/* a transposition of two neighbours costs one edit */
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb && prev2[j - 2] + 1 < best)
				best = prev2[j - 2] + 1;
			cur[j] = best;
		}
		t = prev2;
		prev2 = prev;
		prev = cur;
		cur = t;
	}
	return prev[lb];
}

const char *cfg_suggest(const char *word, const char *const *cands, size_t n)
{
	const char *best = NULL;
	size_t best_d = (size_t)-1;

	for (size_t i = 0; i < n; i++) {
		size_t la = strlen(word), lb = strlen(cands[i]);
		size_t longer = la > lb ? la : lb;
		/* about one edit in three: 'stratgy' -> 'strategy', not 'lr' -> 'xy' */
		size_t limit = (longer + 2) / 3;
		size_t d = cfg_distance(word, cands[i]);

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
