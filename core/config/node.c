/* Config nodes: allocation, ownership, copies, paths and positions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str_index.h"
#include "config/config_impl.h"

weft_cfg *cfg_node_new(weft_cfg_kind kind, const char *file, uint32_t line, uint32_t col,
		       const char *text, size_t len)
{
	weft_cfg *node = calloc(1, sizeof(*node));

	if (!node)
		return NULL;
	node->kind = kind;
	node->file = file;
	node->key_file = file;
	node->line = line;
	node->col = col;
	if (kind == WEFT_CFG_SCALAR) {
		node->text = malloc(len + 1);
		if (!node->text) {
			free(node);
			return NULL;
		}
		if (len)
			memcpy(node->text, text, len);
		node->text[len] = '\0';
	}
	return node;
}

void cfg_node_free(weft_cfg *node)
{
	if (!node)
		return;
	for (size_t i = 0; i < node->n; i++)
		cfg_node_free(node->kids[i]);
	for (size_t i = 0; i < node->n_asked; i++)
		free(node->asked[i]);
	free(node->asked);
	free(node->kid_index.slots);
	free(node->asked_index.slots);
	free(node->kids);
	free(node->text);
	free(node->key);
	free(node);
}

weft_status cfg_index_reserve(struct cfg_index *ix, size_t n, cfg_key_at_fn key_at,
			      const void *owner)
{
	size_t want = ix->n_slots ? ix->n_slots : 64;
	size_t *slots;

	while (2 * (n + 1) > want)
		want *= 2;
	if (want == ix->n_slots)
		return WEFT_OK;
	slots = calloc(want, sizeof(*slots));
	if (!slots)
		return weft_error_set(WEFT_ERR_NOMEM, "config: out of memory indexing a mapping");
	for (size_t i = 0; i < n; i++)
		weft_str_index_put(slots, want, key_at(owner, i), i);
	free(ix->slots);
	ix->slots = slots;
	ix->n_slots = want;
	return WEFT_OK;
}

void cfg_index_put(struct cfg_index *ix, const char *key, size_t i)
{
	weft_str_index_put(ix->slots, ix->n_slots, key, i);
}

size_t cfg_index_find(const struct cfg_index *ix, const char *key, cfg_key_at_fn key_at,
		      const void *owner)
{
	size_t mask = ix->n_slots - 1;

	for (size_t s = weft_str_hash(key) & mask; ix->slots[s]; s = (s + 1) & mask)
		if (strcmp(key_at(owner, ix->slots[s] - 1), key) == 0)
			return ix->slots[s];
	return 0;
}

static const char *kid_key(const void *map, size_t i)
{
	return ((const weft_cfg *)map)->kids[i]->key;
}

weft_status cfg_node_append(weft_cfg *parent, weft_cfg *kid)
{
	int indexed = parent->kind == WEFT_CFG_MAP && kid->key && parent->n + 1 >= CFG_INDEX_MIN;

	if (indexed && cfg_index_reserve(&parent->kid_index, parent->n, kid_key, parent))
		return WEFT_ERR_NOMEM;
	if (parent->n == parent->cap) {
		size_t cap = parent->cap ? parent->cap * 2 : 4;
		weft_cfg **kids = realloc(parent->kids, cap * sizeof(*kids));

		if (!kids)
			return weft_error_set(WEFT_ERR_NOMEM, "config: out of memory adding a node");
		parent->kids = kids;
		parent->cap = cap;
	}
	kid->parent = parent;
	kid->index = parent->n;
	parent->kids[parent->n++] = kid;
	if (indexed)
		cfg_index_put(&parent->kid_index, kid->key, kid->index);
	return WEFT_OK;
}

weft_cfg *cfg_map_find(const weft_cfg *map, const char *key)
{
	size_t at;

	if (!map || map->kind != WEFT_CFG_MAP)
		return NULL;
	if (map->kid_index.slots) {
		at = cfg_index_find(&map->kid_index, key, kid_key, map);
		return at ? map->kids[at - 1] : NULL;
	}
	for (size_t i = 0; i < map->n; i++)
		if (strcmp(map->kids[i]->key, key) == 0)
			return map->kids[i];
	return NULL;
}

weft_cfg *cfg_node_copy(const weft_cfg *src, size_t *budget, weft_status *st)
{
	weft_cfg *node;

	if (++*budget > WEFT_CFG_MAX_COPIED) {
		*st = weft_error_set(WEFT_ERR_CONFIG,
				     "%s:%u:%u: aliases and merge keys expand to more than %d nodes; "
				     "write the repeated values out or share less",
				     src->file, src->line, src->col, WEFT_CFG_MAX_COPIED);
		return NULL;
	}
	node = cfg_node_new(src->kind, src->file, src->line, src->col, src->text,
			    src->text ? strlen(src->text) : 0);
	if (!node)
		goto out_nomem;
	node->key_file = src->key_file;
	node->key_line = src->key_line;
	node->key_col = src->key_col;
	if (src->key) {
		node->key = strdup(src->key);
		if (!node->key)
			goto out_free_node;
	}
	for (size_t i = 0; i < src->n; i++) {
		weft_cfg *kid = cfg_node_copy(src->kids[i], budget, st);

		if (!kid)
			goto out_free_node_keep_status;
		if (cfg_node_append(node, kid) != WEFT_OK) {
			cfg_node_free(kid);
			goto out_free_node;
		}
	}
	return node;

out_free_node:
	cfg_node_free(node);
out_nomem:
	*st = weft_error_set(WEFT_ERR_NOMEM, "config: out of memory copying an alias");
	return NULL;
out_free_node_keep_status:
	cfg_node_free(node);
	return NULL;
}

const char *cfg_intern(weft_config *cfg, const char *name)
{
	char **names;
	char *copy;

	for (size_t i = 0; i < cfg->n_names; i++)
		if (strcmp(cfg->names[i], name) == 0)
			return cfg->names[i];
	copy = strdup(name);
	if (!copy)
		return NULL;
	names = realloc(cfg->names, (cfg->n_names + 1) * sizeof(*names));
	if (!names) {
		free(copy);
		return NULL;
	}
	cfg->names = names;
	cfg->names[cfg->n_names++] = copy;
	return copy;
}

weft_status cfg_bury(weft_config *cfg, weft_cfg *node)
{
	if (cfg->n_grave == cfg->cap_grave) {
		size_t cap = cfg->cap_grave ? cfg->cap_grave * 2 : 8;
		weft_cfg **grave = realloc(cfg->grave, cap * sizeof(*grave));

		if (!grave)
			return weft_error_set(WEFT_ERR_NOMEM, "config: out of memory replacing a node");
		cfg->grave = grave;
		cfg->cap_grave = cap;
	}
	cfg->grave[cfg->n_grave++] = node;
	return WEFT_OK;
}

void weft_config_free(weft_config *cfg)
{
	if (!cfg)
		return;
	cfg_node_free(cfg->root);
	for (size_t i = 0; i < cfg->n_grave; i++)
		cfg_node_free(cfg->grave[i]);
	free(cfg->grave);
	for (size_t i = 0; i < cfg->n_names; i++)
		free(cfg->names[i]);
	free(cfg->names);
	free(cfg);
}

const weft_cfg *weft_config_root(const weft_config *cfg)
{
	return cfg ? cfg->root : NULL;
}

weft_cfg_kind weft_cfg_kind_of(const weft_cfg *node)
{
	return node ? node->kind : WEFT_CFG_NULL;
}

const char *weft_cfg_where(const weft_cfg *node, char *buf, size_t len)
{
	if (!buf || !len)
		return buf;
	if (!node)
		snprintf(buf, len, "<unknown>");
	else
		snprintf(buf, len, "%s:%u:%u", node->file, node->line, node->col);
	return buf;
}

/* Writes the segments from the root down to `node` into buf at *pos. */
static void path_append(const weft_cfg *node, char *buf, size_t len, size_t *pos)
{
	int n;

	if (!node->parent)
		return;
	path_append(node->parent, buf, len, pos);
	if (*pos >= len)
		return;
	if (node->parent->kind == WEFT_CFG_MAP)
		n = snprintf(buf + *pos, len - *pos, "%s%s", node->parent->parent ? "." : "",
			     node->key ? node->key : "");
	else
		n = snprintf(buf + *pos, len - *pos, "%s%zu", node->parent->parent ? "." : "",
			     node->index);
	if (n > 0)
		*pos += (size_t)n;
}

const char *weft_cfg_path(const weft_cfg *node, char *buf, size_t len)
{
	size_t pos = 0;

	if (!buf || !len)
		return buf;
	buf[0] = '\0';
	if (node)
		path_append(node, buf, len, &pos);
	return buf;
}

const char *cfg_describe(const weft_cfg *node, char *buf, size_t len)
{
	if (!node || node->kind == WEFT_CFG_NULL)
		snprintf(buf, len, "null");
	else if (node->kind == WEFT_CFG_MAP)
		snprintf(buf, len, "a mapping");
	else if (node->kind == WEFT_CFG_SEQ)
		snprintf(buf, len, "a sequence");
	else if (strlen(node->text) > 60)
		snprintf(buf, len, "'%.57s...'", node->text);
	else
		snprintf(buf, len, "'%s'", node->text);
	return buf;
}

const char *cfg_name(const weft_cfg *node, char *buf, size_t len)
{
	char path[512];

	weft_cfg_path(node, path, sizeof(path));
	if (!path[0])
		snprintf(buf, len, "the top level");
	else
		snprintf(buf, len, "'%s'", path);
	return buf;
}
