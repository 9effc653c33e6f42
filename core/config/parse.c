/* YAML text -> config tree, with libyaml's event parser.
 *
 * Containers are attached to their parent when they open, so a node's path
 * is known while its children are read. Anchors and aliases are supported
 * by copying (bounded by WEFT_CFG_MAX_COPIED, so a "billion laughs"
 * document is refused instead of eating memory); merge keys ('<<') copy the
 * entries the mapping does not set itself. Tags other than !!str and !!null
 * are ignored: scalars are kept as text and typed by the reader.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/file.h"
#include "config/config_impl.h"

struct frame {
	weft_cfg *node;   /* the open container */
	char *key;        /* a mapping's pending key, NULL when a key is due */
	int key_is_merge; /* the pending key is a plain '<<' */
	uint32_t key_line, key_col;
	weft_cfg **merges; /* values of '<<' keys, applied at the end */
	size_t n_merges;
	size_t anchor; /* index + 1 of the anchor naming this node, or 0 */
};

struct anchor {
	char *name;
	weft_cfg *node;
	int done; /* the node is complete (an alias may copy it) */
};

struct parser {
	weft_config *cfg;
	const char *file;
	const char *text;
	size_t len;
	uint32_t col_base;
	yaml_parser_t yp;
	struct frame stack[WEFT_CFG_MAX_DEPTH];
	size_t depth;
	struct anchor *anchors;
	size_t n_anchors, cap_anchors;
	size_t copied;
	weft_cfg *root;
	int n_docs;
};

static uint32_t line_of(const yaml_mark_t *m)
{
	return (uint32_t)m->line + 1;
}

static uint32_t col_of(const struct parser *p, const yaml_mark_t *m)
{
	return (uint32_t)m->column + 1 + (m->line == 0 ? p->col_base : 0);
}

/* The position of a byte offset (for libyaml's reader errors). */
static void offset_pos(const struct parser *p, size_t off, uint32_t *line, uint32_t *col)
{
	*line = 1;
	*col = 1 + p->col_base;
	for (size_t i = 0; i < off && i < p->len; i++) {
		if (p->text[i] == '\n') {
			++*line;
			*col = 1;
		} else {
			++*col;
		}
	}
}

static weft_status yaml_error(struct parser *p)
{
	const yaml_parser_t *yp = &p->yp;
	uint32_t line, col;

	if (yp->error == YAML_MEMORY_ERROR)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory parsing YAML", p->file);
	if (yp->error == YAML_READER_ERROR) {
		offset_pos(p, yp->problem_offset, &line, &col);
		if (yp->problem_value != -1)
			return weft_error_set(WEFT_ERR_PARSE,
					      "%s:%u:%u: %s (byte 0x%02x); save the file as UTF-8 text",
					      p->file, line, col, yp->problem ? yp->problem : "bad text",
					      (unsigned)yp->problem_value & 0xff);
		return weft_error_set(WEFT_ERR_PARSE, "%s:%u:%u: %s; save the file as UTF-8 text",
				      p->file, line, col, yp->problem ? yp->problem : "bad text");
	}
	line = line_of(&yp->problem_mark);
	col = col_of(p, &yp->problem_mark);
	if (yp->context)
		return weft_error_set(WEFT_ERR_PARSE, "%s:%u:%u: %s %s (started at line %u, column %u)", p->file,
				      line, col, yp->problem ? yp->problem : "invalid YAML",
				      yp->context, line_of(&yp->context_mark),
				      col_of(p, &yp->context_mark));
	return weft_error_set(WEFT_ERR_PARSE, "%s:%u:%u: %s", p->file, line, col,
			      yp->problem ? yp->problem : "invalid YAML");
}

static int is_null_word(const char *s, size_t n)
{
	return n == 0 || (n == 1 && s[0] == '~') ||
	       (n == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4)));
}

static weft_status check_nul(struct parser *p, const yaml_event_t *ev, const char *what,
			     const char *s, size_t n)
{
	if (memchr(s, '\0', n))
		return weft_error_set(WEFT_ERR_CONFIG,
				      "%s:%u:%u: the %s holds a NUL character ('\\0'), which a config "
				      "cannot use; remove it",
				      p->file, line_of(&ev->start_mark), col_of(p, &ev->start_mark), what);
	return WEFT_OK;
}

static weft_status add_anchor(struct parser *p, const yaml_char_t *name, weft_cfg *node, int done,
			      size_t *index)
{
	struct anchor *a;

	if (p->n_anchors == p->cap_anchors) {
		size_t cap = p->cap_anchors ? p->cap_anchors * 2 : 8;

		a = realloc(p->anchors, cap * sizeof(*a));
		if (!a)
			return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", p->file);
		p->anchors = a;
		p->cap_anchors = cap;
	}
	a = &p->anchors[p->n_anchors];
	a->name = strdup((const char *)name);
	if (!a->name)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", p->file);
	a->node = node;
	a->done = done;
	p->n_anchors++;
	if (index)
		*index = p->n_anchors;
	return WEFT_OK;
}

/* Gives `node` to the open container (or makes it the root). Takes the
 * node in every case: on error it is freed. */
static weft_status attach(struct parser *p, weft_cfg *node)
{
	struct frame *f;
	weft_cfg *dup;
	char name[600], where[560];
	weft_status st;

	free(node->key);
	node->key = NULL;
	if (p->depth == 0) {
		p->root = node;
		return WEFT_OK;
	}
	f = &p->stack[p->depth - 1];
	if (f->node->kind == WEFT_CFG_SEQ) {
		st = cfg_node_append(f->node, node);
		if (st != WEFT_OK)
			cfg_node_free(node);
		return st;
	}
	node->key = f->key;
	node->key_file = p->file;
	node->key_line = f->key_line;
	node->key_col = f->key_col;
	f->key = NULL;
	if (f->key_is_merge) {
		weft_cfg **m = realloc(f->merges, (f->n_merges + 1) * sizeof(*m));

		if (!m) {
			cfg_node_free(node);
			return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", p->file);
		}
		f->merges = m;
		node->parent = f->node;
		f->merges[f->n_merges++] = node;
		return WEFT_OK;
	}
	dup = cfg_map_find(f->node, node->key);
	if (dup) {
		snprintf(where, sizeof(where), "%s:%u:%u", dup->key_file, dup->key_line, dup->key_col);
		st = weft_error_set(WEFT_ERR_CONFIG,
				    "%s:%u:%u: duplicate key '%s' in %s (first at %s); keep only one of them",
				    p->file, node->key_line, node->key_col, node->key,
				    cfg_name(f->node, name, sizeof(name)), where);
		cfg_node_free(node);
		return st;
	}
	st = cfg_node_append(f->node, node);
	if (st != WEFT_OK)
		cfg_node_free(node);
	return st;
}

/* Applies the '<<' merges of a mapping that just closed: every entry of
 * the merged mappings that the mapping does not set itself is copied in,
 * earlier merges winning over later ones. */
static weft_status apply_merges(struct parser *p, struct frame *f)
{
	weft_status st = WEFT_OK;
	char what[80];

	for (size_t m = 0; m < f->n_merges && st == WEFT_OK; m++) {
		weft_cfg *src = f->merges[m];
		size_t nsrc = src->kind == WEFT_CFG_SEQ ? src->n : 1;

		for (size_t s = 0; s < nsrc && st == WEFT_OK; s++) {
			weft_cfg *map = src->kind == WEFT_CFG_SEQ ? src->kids[s] : src;

			if (map->kind != WEFT_CFG_MAP) {
				st = weft_error_set(WEFT_ERR_CONFIG,
						    "%s:%u:%u: a merge key '<<' takes a mapping or a list "
						    "of mappings (like '<<: *defaults'), got %s",
						    map->file, map->line, map->col,
						    cfg_describe(map, what, sizeof(what)));
				break;
			}
			for (size_t i = 0; i < map->n && st == WEFT_OK; i++) {
				weft_cfg *kid;

				if (cfg_map_find(f->node, map->kids[i]->key))
					continue;
				kid = cfg_node_copy(map->kids[i], &p->copied, &st);
				if (!kid)
					break;
				st = cfg_node_append(f->node, kid);
				if (st != WEFT_OK)
					cfg_node_free(kid);
			}
		}
	}
	/* The merge values stay alive (an anchor may name them). */
	for (size_t m = 0; m < f->n_merges; m++) {
		if (st == WEFT_OK)
			st = cfg_bury(p->cfg, f->merges[m]);
		if (st != WEFT_OK)
			cfg_node_free(f->merges[m]);
	}
	free(f->merges);
	f->merges = NULL;
	f->n_merges = 0;
	return st;
}

static weft_status on_scalar(struct parser *p, const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;
	const char *tag = (const char *)ev->data.scalar.tag;
	struct frame *f = p->depth ? &p->stack[p->depth - 1] : NULL;
	weft_cfg_kind kind = WEFT_CFG_SCALAR;
	weft_cfg *node;
	weft_status st;

	if (f && f->node->kind == WEFT_CFG_MAP && !f->key) {
		st = check_nul(p, ev, "key", s, n);
		if (st != WEFT_OK)
			return st;
		f->key = malloc(n + 1);
		if (!f->key)
			return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", p->file);
		memcpy(f->key, s, n);
		f->key[n] = '\0';
		f->key_is_merge = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
				  strcmp(f->key, "<<") == 0;
		f->key_line = line_of(&ev->start_mark);
		f->key_col = col_of(p, &ev->start_mark);
		return WEFT_OK;
	}
	st = check_nul(p, ev, "value", s, n);
	if (st != WEFT_OK)
		return st;
	if (tag && !strcmp(tag, YAML_NULL_TAG))
		kind = WEFT_CFG_NULL;
	else if (!(tag && !strcmp(tag, YAML_STR_TAG)) && ev->data.scalar.plain_implicit &&
		 ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && is_null_word(s, n))
		kind = WEFT_CFG_NULL;
	node = cfg_node_new(kind, p->file, line_of(&ev->start_mark), col_of(p, &ev->start_mark), s,
			    n);
	if (!node)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", p->file);
	st = attach(p, node);
	if (st == WEFT_OK && ev->data.scalar.anchor)
		st = add_anchor(p, ev->data.scalar.anchor, node, 1, NULL);
	return st;
}

static weft_status on_alias(struct parser *p, const yaml_event_t *ev)
{
	const char *name = (const char *)ev->data.alias.anchor;
	struct frame *f = p->depth ? &p->stack[p->depth - 1] : NULL;
	uint32_t line = line_of(&ev->start_mark), col = col_of(p, &ev->start_mark);
	weft_status st = WEFT_OK;
	weft_cfg *copy;

	if (f && f->node->kind == WEFT_CFG_MAP && !f->key)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "%s:%u:%u: an alias ('*%s') cannot be a key; write the key out",
				      p->file, line, col, name);
	for (size_t i = p->n_anchors; i-- > 0;) {
		struct anchor *a = &p->anchors[i];

		if (strcmp(a->name, name) != 0)
			continue;
		if (!a->done)
			return weft_error_set(WEFT_ERR_CONFIG,
					      "%s:%u:%u: alias '*%s' is inside the node its anchor "
					      "names, which would repeat forever; move it out",
					      p->file, line, col, name);
		copy = cfg_node_copy(a->node, &p->copied, &st);
		if (!copy)
			return st;
		return attach(p, copy);
	}
	return weft_error_set(WEFT_ERR_CONFIG,
			      "%s:%u:%u: alias '*%s' names no anchor; define '&%s' on a value "
			      "before this line",
			      p->file, line, col, name, name);
}

static weft_status on_open(struct parser *p, const yaml_event_t *ev, weft_cfg_kind kind)
{
	struct frame *f = p->depth ? &p->stack[p->depth - 1] : NULL;
	uint32_t line = line_of(&ev->start_mark), col = col_of(p, &ev->start_mark);
	const yaml_char_t *anchor = kind == WEFT_CFG_MAP ? ev->data.mapping_start.anchor
							  : ev->data.sequence_start.anchor;
	weft_cfg *node;
	weft_status st;
	size_t index = 0;

	if (f && f->node->kind == WEFT_CFG_MAP && !f->key)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "%s:%u:%u: a key must be a plain string, not a %s",
				      p->file, line, col, kind == WEFT_CFG_MAP ? "mapping" : "sequence");
	if (p->depth == WEFT_CFG_MAX_DEPTH)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "%s:%u:%u: values are nested more than %d levels deep; flatten "
				      "the config",
				      p->file, line, col, WEFT_CFG_MAX_DEPTH);
	node = cfg_node_new(kind, p->file, line, col, NULL, 0);
	if (!node)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", p->file);
	st = attach(p, node);
	if (st != WEFT_OK)
		return st;
	if (anchor) {
		st = add_anchor(p, anchor, node, 0, &index);
		if (st != WEFT_OK)
			return st;
	}
	p->stack[p->depth++] = (struct frame){ .node = node, .anchor = index };
	return WEFT_OK;
}

static weft_status on_close(struct parser *p)
{
	struct frame *f = &p->stack[p->depth - 1];
	weft_status st = WEFT_OK;

	if (f->n_merges)
		st = apply_merges(p, f);
	if (f->anchor)
		p->anchors[f->anchor - 1].done = 1;
	free(f->key);
	p->depth--;
	return st;
}

static weft_status on_event(struct parser *p, const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_DOCUMENT_START_EVENT:
		if (++p->n_docs > 1)
			return weft_error_set(WEFT_ERR_CONFIG,
					      "%s:%u:%u: a second YAML document starts here ('---'); "
					      "a config is one document, so merge them or split the file",
					      p->file, line_of(&ev->start_mark),
					      col_of(p, &ev->start_mark));
		return WEFT_OK;
	case YAML_SCALAR_EVENT:
		return on_scalar(p, ev);
	case YAML_ALIAS_EVENT:
		return on_alias(p, ev);
	case YAML_SEQUENCE_START_EVENT:
		return on_open(p, ev, WEFT_CFG_SEQ);
	case YAML_MAPPING_START_EVENT:
		return on_open(p, ev, WEFT_CFG_MAP);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		return on_close(p);
	default:
		return WEFT_OK;
	}
}

weft_status cfg_parse(weft_config *cfg, const char *file, const char *text, size_t len,
		      uint32_t col_base, weft_cfg **out)
{
	struct parser *p;
	yaml_event_t ev;
	weft_status st = WEFT_OK;
	int done = 0;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", file);
	p->cfg = cfg;
	p->file = cfg_intern(cfg, file);
	p->text = text;
	p->len = len;
	p->col_base = col_base;
	if (!p->file || !yaml_parser_initialize(&p->yp)) {
		st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", file);
		goto out_free_parser;
	}
	yaml_parser_set_input_string(&p->yp, (const unsigned char *)text, len);
	while (!done) {
		if (!yaml_parser_parse(&p->yp, &ev)) {
			st = yaml_error(p);
			break;
		}
		done = ev.type == YAML_STREAM_END_EVENT;
		st = on_event(p, &ev);
		yaml_event_delete(&ev);
		if (st != WEFT_OK)
			break;
	}
	while (p->depth) {
		struct frame *f = &p->stack[--p->depth];

		for (size_t m = 0; m < f->n_merges; m++)
			cfg_node_free(f->merges[m]);
		free(f->merges);
		free(f->key);
	}
	for (size_t i = 0; i < p->n_anchors; i++)
		free(p->anchors[i].name);
	free(p->anchors);
	yaml_parser_delete(&p->yp);
	if (st != WEFT_OK) {
		cfg_node_free(p->root);
		goto out_free_parser;
	}
	if (!p->root) {
		p->root = cfg_node_new(WEFT_CFG_NULL, p->file, 1, 1 + col_base, NULL, 0);
		if (!p->root) {
			st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", file);
			goto out_free_parser;
		}
	}
	*out = p->root;
out_free_parser:
	free(p);
	return st;
}

static weft_status too_big(const char *name, long long bytes)
{
	return weft_error_set(WEFT_ERR_CONFIG, "config '%s' is %lld bytes; a config may be at "
			      "most %d MiB (hand-written settings, not data): keep lists and "
			      "tables in data files and give their paths", name, bytes,
			      WEFT_CFG_MAX_BYTES >> 20);
}

weft_status weft_config_load_string(const char *name, const char *text, size_t len,
				    weft_config **out)
{
	weft_config *cfg;
	weft_cfg *root;
	weft_status st;
	char what[80];

	if (!out || (!text && len))
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "weft_config_load_string: out and text must not be NULL");
	*out = NULL;
	if (!name)
		name = "<string>";
	if (len > WEFT_CFG_MAX_BYTES)
		return too_big(name, (long long)len);
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", name);
	st = cfg_parse(cfg, name, text ? text : "", len, 0, &root);
	if (st != WEFT_OK)
		goto out_free_cfg;
	if (root->kind == WEFT_CFG_NULL) {
		root->kind = WEFT_CFG_MAP;
	} else if (root->kind != WEFT_CFG_MAP) {
		st = weft_error_set(WEFT_ERR_CONFIG,
				    "%s:%u:%u: the top level of a config must be a mapping of "
				    "'key: value' lines, got %s",
				    root->file, root->line, root->col,
				    cfg_describe(root, what, sizeof(what)));
		cfg_node_free(root);
		goto out_free_cfg;
	}
	cfg->root = root;
	*out = cfg;
	return WEFT_OK;

out_free_cfg:
	weft_config_free(cfg);
	return st;
}

weft_status weft_config_load_file(const char *path, weft_config **out)
{
	char *buf = NULL;
	int64_t size;
	size_t len;
	weft_status st;
	FILE *f;

	if (!path || !out)
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "weft_config_load_file: path and out must not be NULL");
	*out = NULL;
	st = weft_file_fopen_read(path, "config", &f, &size);
	if (st == WEFT_ERR_NOT_FOUND) {
		char why[1024];

		snprintf(why, sizeof(why), "%s", weft_error_last());
		return weft_error_set(st, "%s; check the path given to --config", why);
	}
	if (st)
		return st;
	if (size > WEFT_CFG_MAX_BYTES) {
		st = too_big(path, (long long)size);
		goto out_close;
	}
	buf = malloc((size_t)size + 1);
	if (!buf) {
		st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory reading it", path);
		goto out_close;
	}
	/* one byte more than the size: a file that grew past it is not cut */
	len = fread(buf, 1, (size_t)size + 1, f);
	if (ferror(f)) {
		st = weft_error_set(WEFT_ERR_IO, "cannot read config '%s': %s", path,
				    strerror(errno));
		goto out_free_buf;
	}
	if (len > WEFT_CFG_MAX_BYTES) {
		st = too_big(path, (long long)len);
		goto out_free_buf;
	}
	st = weft_config_load_string(path, buf, len, out);
out_free_buf:
	free(buf);
out_close:
	fclose(f);
	return st;
}
