/* Command-line overrides ("--trainer.devices=2") and weft_config_set. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_impl.h"

/* Where the new nodes come from and how to name the request in messages. */
struct origin {
	const char *file; /* "<command line>" or "<default>" */
	const char *what; /* "override '--a.b=1'" */
	const char *path; /* the dotted path, columns count from its start */
	uint32_t path_col; /* column of path[0] */
	int mark;          /* the new nodes count as read */
	int keep_key;      /* the value keeps where its own key was written (a graft) */
};

/* The dotted path of the first `n` bytes of the request's path. */
static const char *prefix(const struct origin *o, size_t n, char *buf, size_t len)
{
	snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), o->path);
	return buf;
}

/* Puts `val` where `old` is (in a mapping or a sequence), or appends it
 * under `key` to mapping `parent` when `old` is NULL. */
static weft_status place(weft_config *cfg, const struct origin *o, weft_cfg *parent,
			 weft_cfg *old, weft_cfg *val, const char *key, uint32_t key_col)
{
	weft_status st;

	free(val->key);
	val->key = NULL;
	if (parent->kind == WEFT_CFG_MAP) {
		val->key = strdup(key);
		if (!val->key)
			return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", o->what);
	}
	if (!old) {
		if (!o->keep_key || !val->key_file) {
			val->key_file = val->file;
			val->key_line = 1;
			val->key_col = key_col;
		}
		val->used = (uint8_t)o->mark;
		return cfg_node_append(parent, val);
	}
	st = cfg_bury(cfg, old);
	if (st != WEFT_OK)
		return st;
	if (!o->keep_key || !val->key_file) {
		val->key_file = old->key_file;
		val->key_line = old->key_line;
		val->key_col = old->key_col;
	}
	val->used = (uint8_t)(old->used | o->mark);
	val->parent = parent;
	val->index = old->index;
	parent->kids[old->index] = val;
	return WEFT_OK;
}

/* Turns a null on the path into an empty mapping made by this request. */
static void null_to_map(weft_cfg *node, const struct origin *o, uint32_t col)
{
	node->kind = WEFT_CFG_MAP;
	node->file = o->file;
	node->line = 1;
	node->col = col;
}

/* The child of `cur` named by `key` (segment at offset `off` of the
 * path), or NULL when a mapping lacks it; an error for a sequence index
 * that does not fit. */
static weft_status child(const struct origin *o, weft_cfg *cur, const char *key, size_t off,
			 weft_cfg **out)
{
	char path[512], *end;
	unsigned long long idx;

	*out = NULL;
	if (cur->kind == WEFT_CFG_MAP) {
		*out = cfg_map_find(cur, key);
		return WEFT_OK;
	}
	idx = strtoull(key, &end, 10);
	if (key[0] < '0' || key[0] > '9' || *end || idx >= cur->n)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "%s: '%s' is a sequence of %zu items, and '%s' is not an index "
				      "in it (0 to %zu)",
				      o->what, prefix(o, off - 1, path, sizeof(path)), cur->n, key,
				      cur->n ? cur->n - 1 : 0);
	*out = cur->kids[idx];
	return WEFT_OK;
}

/* Length of the well-formed UTF-8 character at s that is not a control
 * character (C0, DEL, C1), or 0. */
static size_t text_char(const unsigned char *s)
{
	unsigned cp;
	size_t n;

	if (s[0] >= 0x20 && s[0] < 0x7f)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1fu;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0fu;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07u;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3fu);
	}
	/* overlong forms, surrogates, past U+10FFFF, C1 controls */
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp <= 0x9f)
		return 0;
	return n;
}

/* Checks the whole path before anything changes: UTF-8 text without
 * control characters, no empty key, not too deep. */
static weft_status check_path(const struct origin *o)
{
	size_t depth = 1;

	for (const char *s = o->path;; s++) {
		size_t n = *s ? text_char((const unsigned char *)s) : 1;

		if (!n)
			return weft_error_set(WEFT_ERR_CONFIG,
					      "%s: the key has byte 0x%02x at column %u, which is not "
					      "printable UTF-8 text; keys are plain names like "
					      "trainer.devices",
					      o->what, (unsigned char)*s,
					      o->path_col + (uint32_t)(s - o->path));
		if (n > 1) {
			s += n - 1;
			continue;
		}
		if ((*s == '.' || !*s) && (s == o->path || s[-1] == '.'))
			return weft_error_set(WEFT_ERR_CONFIG,
					      "%s: empty key at column %u; separate keys with single "
					      "dots, like trainer.devices",
					      o->what, o->path_col + (uint32_t)(s - o->path));
		if (!*s)
			break;
		if (*s == '.' && ++depth > WEFT_CFG_MAX_DEPTH)
			return weft_error_set(WEFT_ERR_CONFIG, "%s: the path has more than %d keys",
					      o->what, WEFT_CFG_MAX_DEPTH);
	}
	return WEFT_OK;
}

static weft_status place_path(weft_config *cfg, const struct origin *o, weft_cfg *val);

/* Sets the path of `o` to the YAML `value` (columns from value_col). */
static weft_status set_path(weft_config *cfg, const struct origin *o, const char *value,
			    uint32_t value_col)
{
	weft_cfg *val;
	weft_status st;

	st = check_path(o);
	if (st != WEFT_OK)
		return st;
	st = cfg_parse(cfg, o->file, value, strlen(value), value_col - 1, &val);
	if (st != WEFT_OK)
		return weft_error_wrap(st == WEFT_ERR_PARSE ? WEFT_ERR_CONFIG : st, "%s", o->what);
	if (o->mark)
		weft_cfg_mark_used(val);
	return place_path(cfg, o, val);
}

/* Puts `val` (owned; freed on error) at the path of `o`, making the
 * mappings the path is missing. */
static weft_status place_path(weft_config *cfg, const struct origin *o, weft_cfg *val)
{
	const char *seg = o->path, *dot;
	weft_cfg *cur = cfg->root, *kid;
	char path[512], where[600], got[80], *key = NULL;
	weft_status st;

	for (;; seg = dot + 1) {
		size_t n;
		uint32_t col = o->path_col + (uint32_t)(seg - o->path);

		dot = strchr(seg, '.');
		n = dot ? (size_t)(dot - seg) : strlen(seg);
		free(key);
		key = strndup(seg, n);
		if (!key) {
			st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", o->what);
			goto out_free_val;
		}
		st = child(o, cur, key, (size_t)(seg - o->path), &kid);
		if (st != WEFT_OK)
			goto out_free_val;
		if (!dot) {
			st = place(cfg, o, cur, kid, val, key, col);
			if (st != WEFT_OK)
				goto out_free_val;
			free(key);
			return WEFT_OK;
		}
		if (!kid) {
			kid = cfg_node_new(WEFT_CFG_MAP, o->file, 1, col, NULL, 0);
			if (!kid || place(cfg, o, cur, NULL, kid, key, col) != WEFT_OK) {
				cfg_node_free(kid);
				st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", o->what);
				goto out_free_val;
			}
		} else if (kid->kind == WEFT_CFG_NULL) {
			null_to_map(kid, o, col);
		} else if (kid->kind == WEFT_CFG_SCALAR) {
			st = weft_error_set(WEFT_ERR_CONFIG,
					    "%s: '%s' is a value (%s at %s), not a mapping, so it cannot "
					    "hold '%s'; set '%s' itself or fix the path",
					    o->what, prefix(o, (size_t)(dot - o->path), path, sizeof(path)),
					    cfg_describe(kid, got, sizeof(got)),
					    weft_cfg_where(kid, where, sizeof(where)), dot + 1, path);
			goto out_free_val;
		}
		if (o->mark && cur->kind == WEFT_CFG_MAP)
			kid->used = 1;
		cur = kid;
	}

out_free_val:
	free(key);
	cfg_node_free(val);
	return st;
}

weft_status weft_config_override(weft_config *cfg, const char *arg)
{
	char what[600];
	char *path;
	const char *start, *eq;
	struct origin o;
	weft_status st;

	if (!cfg || !arg)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "weft_config_override: NULL argument");
	snprintf(what, sizeof(what), "override '%s'", arg);
	start = strncmp(arg, "--", 2) == 0 ? arg + 2 : arg;
	eq = strchr(start, '=');
	if (!eq)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "%s: expected KEY=VALUE with a dotted key, like "
				      "--trainer.devices=2",
				      what);
	if (eq == start)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "%s: the key before '=' is empty; write it like "
				      "--trainer.devices=2",
				      what);
	path = strndup(start, (size_t)(eq - start));
	if (!path)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", what);
	o = (struct origin){
		.file = "<command line>",
		.what = what,
		.path = path,
		.path_col = (uint32_t)(start - arg) + 1,
	};
	st = set_path(cfg, &o, eq + 1, (uint32_t)(eq + 1 - arg) + 1);
	free(path);
	return st;
}

weft_status weft_config_set(weft_config *cfg, const char *path, const char *value)
{
	char what[600];
	struct origin o;

	if (!cfg || !path || !value)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "weft_config_set: NULL argument");
	snprintf(what, sizeof(what), "setting '%s' to '%s'", path, value);
	if (!path[0])
		return weft_error_set(WEFT_ERR_CONFIG, "%s: the path is empty", what);
	o = (struct origin){
		.file = "<default>",
		.what = what,
		.path = path,
		.path_col = 1,
		.mark = 1,
	};
	return set_path(cfg, &o, value, 1);
}

/* Re-interns the file names of a copied subtree in `cfg` (the copy's
 * names may belong to another document). */
static weft_status intern_tree(weft_config *cfg, weft_cfg *n)
{
	if (n->file && !(n->file = cfg_intern(cfg, n->file)))
		return weft_error_set(WEFT_ERR_NOMEM, "config graft: out of memory");
	if (n->key_file && !(n->key_file = cfg_intern(cfg, n->key_file)))
		return weft_error_set(WEFT_ERR_NOMEM, "config graft: out of memory");
	for (size_t i = 0; i < n->n; i++) {
		weft_status st = intern_tree(cfg, n->kids[i]);

		if (st != WEFT_OK)
			return st;
	}
	return WEFT_OK;
}

weft_status weft_config_graft(weft_config *cfg, const char *path, const weft_cfg *src)
{
	char what[600];
	size_t budget = 0;
	struct origin o;
	weft_cfg *val;
	weft_status st;

	if (!cfg || !path || !src)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "weft_config_graft: NULL argument");
	snprintf(what, sizeof(what), "setting '%s'", path);
	o = (struct origin){ .file = "<default>", .what = what, .path = path, .path_col = 1,
			     .keep_key = 1 };
	st = check_path(&o);
	if (st != WEFT_OK)
		return st;
	val = cfg_node_copy(src, &budget, &st);
	if (!val)
		return st;
	st = intern_tree(cfg, val);
	if (st != WEFT_OK) {
		cfg_node_free(val);
		return st;
	}
	return place_path(cfg, &o, val);
}
