/* Reading the tree: lookups that mark what they read, typed conversions,
 * getters with defaults, choices, and reader-made errors.
 *
 * Read-marks live in the nodes although readers hold const pointers: they
 * are bookkeeping about the reading, not part of the value (the contract in
 * weft/config.h says one config is read from one thread).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config/config_impl.h"
#include "weft/log.h"

static const char *asked_key(const void *map, size_t i)
{
	return ((const weft_cfg *)map)->asked[i];
}

/* Records that a reader asked `map` for `key` (a did-you-mean candidate).
 * O(1) on average: a mapping asked for many keys indexes them. */
static void note_asked(weft_cfg *map, const char *key)
{
	char *copy;

	if (map->asked_index.slots) {
		if (cfg_index_find(&map->asked_index, key, asked_key, map))
			return;
	} else {
		for (size_t i = 0; i < map->n_asked; i++)
			if (strcmp(map->asked[i], key) == 0)
				return;
	}
	/* Out of memory only costs a suggestion. */
	if (map->n_asked + 1 >= CFG_INDEX_MIN &&
	    cfg_index_reserve(&map->asked_index, map->n_asked, asked_key, map) != WEFT_OK)
		return;
	if (map->n_asked == map->cap_asked) {
		size_t cap = map->cap_asked ? map->cap_asked * 2 : 8;
		char **asked = realloc(map->asked, cap * sizeof(*asked));

		if (!asked)
			return;
		map->asked = asked;
		map->cap_asked = cap;
	}
	copy = strdup(key);
	if (!copy)
		return;
	map->asked[map->n_asked] = copy;
	if (map->asked_index.slots)
		cfg_index_put(&map->asked_index, copy, map->n_asked);
	map->n_asked++;
}

/* WEFT_CONFIG_TRACE=FILE: every key a reader asks a mapping for is
 * appended to FILE as its dotted path ("trainer.devices"), one per line,
 * whether or not the config has it. A debug aid that lists the keys the
 * code reads (tests/sdk/test_config_doc checks each against
 * docs/config.md); unset, it costs one getenv per lookup. Lines are single
 * O_APPEND writes, so the ranks of one job can share a file. */
static void trace_asked(const weft_cfg *map, const char *key)
{
	const char *file = getenv("WEFT_CONFIG_TRACE");
	char path[1024], line[1280];
	int fd, n;

	if (!file || !file[0])
		return;
	weft_cfg_path(map, path, sizeof(path));
	n = snprintf(line, sizeof(line), "%s%s%s\n", path, path[0] ? "." : "", key);
	if (n <= 0 || (size_t)n >= sizeof(line))
		return;
	fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) != n)
		weft_log(WEFT_LOG_DEBUG, "config trace: short write to %s", file);
	close(fd);
}

const weft_cfg *weft_cfg_get(const weft_cfg *map, const char *key)
{
	weft_cfg *m = (weft_cfg *)map;
	weft_cfg *kid;

	if (!m || m->kind != WEFT_CFG_MAP || !key)
		return NULL;
	trace_asked(m, key);
	note_asked(m, key);
	kid = cfg_map_find(m, key);
	if (kid)
		kid->used = 1;
	return kid;
}

size_t weft_cfg_size(const weft_cfg *node)
{
	if (!node || (node->kind != WEFT_CFG_MAP && node->kind != WEFT_CFG_SEQ))
		return 0;
	return node->n;
}

const weft_cfg *weft_cfg_at(const weft_cfg *node, size_t i)
{
	weft_cfg *n = (weft_cfg *)node;

	if (!n || (n->kind != WEFT_CFG_MAP && n->kind != WEFT_CFG_SEQ) || i >= n->n)
		return NULL;
	if (n->kind == WEFT_CFG_MAP)
		n->kids[i]->used = 1;
	return n->kids[i];
}

const char *weft_cfg_key_at(const weft_cfg *map, size_t i)
{
	if (!map || map->kind != WEFT_CFG_MAP || i >= map->n)
		return NULL;
	return map->kids[i]->key;
}

const char *weft_cfg_scalar(const weft_cfg *node)
{
	return node && node->kind == WEFT_CFG_SCALAR ? node->text : NULL;
}

void weft_cfg_mark_used(const weft_cfg *node)
{
	weft_cfg *n = (weft_cfg *)node;

	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++) {
		if (n->kind == WEFT_CFG_MAP)
			n->kids[i]->used = 1;
		weft_cfg_mark_used(n->kids[i]);
	}
}

static weft_status errorv(const weft_cfg *node, const char *fmt, va_list ap)
{
	char where[600], name[600], msg[3000];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	weft_cfg_where(node, where, sizeof(where));
	cfg_name(node, name, sizeof(name));
	return weft_error_set(WEFT_ERR_CONFIG, "%s: %s %s", where, name, msg);
}

weft_status weft_cfg_error(const weft_cfg *node, const char *fmt, ...)
{
	va_list ap;
	weft_status st;

	va_start(ap, fmt);
	st = errorv(node, fmt, ap);
	va_end(ap);
	return st;
}

static weft_status type_error(const weft_cfg *node, const char *want)
{
	char got[80];

	if (!node)
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "config: no value to read as %s (the key is absent)", want);
	return weft_cfg_error(node, "must be %s, got %s", want, cfg_describe(node, got, sizeof(got)));
}

/* Copies `s` into buf without '_' between digits; 0 if it does not fit. */
static int strip_underscores(const char *s, char *buf, size_t len)
{
	size_t j = 0;

	for (size_t i = 0; s[i]; i++) {
		if (s[i] == '_' && i > 0 && isxdigit((unsigned char)s[i - 1]))
			continue;
		if (j + 1 >= len)
			return 0;
		buf[j++] = s[i];
	}
	buf[j] = '\0';
	return 1;
}

/* YAML float forms: [-+]?(.inf|.nan) and [-+]?(d+(.d*)?|.d+)([eE][-+]?d+)?.
 * 1 and *out on success, 0 when the text is not a float, -1 on overflow. */
static int parse_float(const char *text, double *out)
{
	char buf[256];
	const char *s = buf;
	char *end;
	int digits = 0;
	double v;

	if (!strip_underscores(text, buf, sizeof(buf)))
		return 0;
	if (*s == '+' || *s == '-')
		s++;
	if (!strcmp(s, ".inf") || !strcmp(s, ".Inf") || !strcmp(s, ".INF")) {
		*out = buf[0] == '-' ? -INFINITY : INFINITY;
		return 1;
	}
	if (s == buf && (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN"))) {
		*out = NAN;
		return 1;
	}
	while (isdigit((unsigned char)*s))
		s++, digits++;
	if (*s == '.')
		for (s++; isdigit((unsigned char)*s); s++)
			digits++;
	if (!digits)
		return 0;
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!isdigit((unsigned char)*s))
			return 0;
		while (isdigit((unsigned char)*s))
			s++;
	}
	if (*s)
		return 0;
	errno = 0;
	v = strtod(buf, &end);
	if (*end)
		return 0;
	if (isinf(v))
		return -1;
	*out = v;
	return 1;
}

/* Decimal or 0x-hex with '_' separators. 1 on success, 0 when the text is
 * not an integer, -1 on overflow. */
static int parse_int(const char *text, int64_t *out)
{
	char buf[256];
	const char *s = buf;
	int neg = 0, base = 10, digits = 0;
	uint64_t v = 0, limit;

	if (!strip_underscores(text, buf, sizeof(buf)))
		return 0;
	if (*s == '+' || *s == '-')
		neg = *s++ == '-';
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; *s; s++) {
		int d;

		if (isdigit((unsigned char)*s))
			d = *s - '0';
		else if (base == 16 && isxdigit((unsigned char)*s))
			d = tolower((unsigned char)*s) - 'a' + 10;
		else
			return 0;
		if (v > (limit - (uint64_t)d) / (uint64_t)base)
			return -1;
		v = v * (uint64_t)base + (uint64_t)d;
		digits++;
	}
	if (!digits)
		return 0;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 1;
}

weft_status weft_cfg_as_int(const weft_cfg *node, int64_t *out)
{
	double d;
	int r;

	if (!node || node->kind != WEFT_CFG_SCALAR)
		return type_error(node, "an integer");
	r = parse_int(node->text, out);
	if (r > 0)
		return WEFT_OK;
	if (r < 0)
		return weft_cfg_error(node,
				      "must be an integer from -9223372036854775808 to "
				      "9223372036854775807, got '%s', which is out of range",
				      node->text);
	/* 1e5 is a fine way to write 100000: take floats that are exact. */
	if (parse_float(node->text, &d) > 0 && isfinite(d) && d == floor(d) &&
	    fabs(d) <= 9007199254740992.0) {
		*out = (int64_t)d;
		return WEFT_OK;
	}
	return type_error(node, "an integer");
}

weft_status weft_cfg_as_float(const weft_cfg *node, double *out)
{
	int64_t i;
	int r;

	if (!node || node->kind != WEFT_CFG_SCALAR)
		return type_error(node, "a number");
	r = parse_float(node->text, out);
	if (r > 0)
		return WEFT_OK;
	if (r < 0)
		return weft_cfg_error(node, "must be a number, got '%s', which is out of the range "
				      "of a double (about 1.8e308)", node->text);
	if (parse_int(node->text, &i) > 0) {
		*out = (double)i;
		return WEFT_OK;
	}
	return type_error(node, "a number");
}

weft_status weft_cfg_as_bool(const weft_cfg *node, int *out)
{
	static const char *const yes[] = { "true", "yes", "on" };
	static const char *const no[] = { "false", "no", "off" };

	if (!node || node->kind != WEFT_CFG_SCALAR)
		return type_error(node, "true or false");
	for (size_t i = 0; i < 3; i++) {
		if (!strcasecmp(node->text, yes[i])) {
			*out = 1;
			return WEFT_OK;
		}
		if (!strcasecmp(node->text, no[i])) {
			*out = 0;
			return WEFT_OK;
		}
	}
	return type_error(node, "true or false");
}

weft_status weft_cfg_as_str(const weft_cfg *node, const char **out)
{
	if (!node || node->kind != WEFT_CFG_SCALAR)
		return type_error(node, "a string");
	*out = node->text;
	return WEFT_OK;
}

/* The value of `key` for a getter: *val NULL means "use the default".
 * A `map` that exists but is no mapping is an error: its keys cannot be
 * read, and silently using defaults would hide the mistake. */
static weft_status lookup(const weft_cfg *map, const char *key, const weft_cfg **val)
{
	char got[80];

	*val = NULL;
	if (!key)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "config: NULL key");
	if (!map || map->kind == WEFT_CFG_NULL)
		return WEFT_OK;
	if (map->kind != WEFT_CFG_MAP)
		return weft_cfg_error(map, "must be a mapping (it should hold '%s'), got %s", key,
				      cfg_describe(map, got, sizeof(got)));
	*val = weft_cfg_get(map, key);
	if (*val && (*val)->kind == WEFT_CFG_NULL)
		*val = NULL;
	return WEFT_OK;
}

weft_status weft_cfg_int(const weft_cfg *map, const char *key, int64_t def, int64_t *out)
{
	const weft_cfg *v;
	weft_status st = lookup(map, key, &v);

	if (st != WEFT_OK)
		return st;
	if (!v) {
		*out = def;
		return WEFT_OK;
	}
	return weft_cfg_as_int(v, out);
}

weft_status weft_cfg_float(const weft_cfg *map, const char *key, double def, double *out)
{
	const weft_cfg *v;
	weft_status st = lookup(map, key, &v);

	if (st != WEFT_OK)
		return st;
	if (!v) {
		*out = def;
		return WEFT_OK;
	}
	return weft_cfg_as_float(v, out);
}

weft_status weft_cfg_bool(const weft_cfg *map, const char *key, int def, int *out)
{
	const weft_cfg *v;
	weft_status st = lookup(map, key, &v);

	if (st != WEFT_OK)
		return st;
	if (!v) {
		*out = def;
		return WEFT_OK;
	}
	return weft_cfg_as_bool(v, out);
}

weft_status weft_cfg_str(const weft_cfg *map, const char *key, const char *def, const char **out)
{
	const weft_cfg *v;
	weft_status st = lookup(map, key, &v);

	if (st != WEFT_OK)
		return st;
	if (!v) {
		*out = def;
		return WEFT_OK;
	}
	return weft_cfg_as_str(v, out);
}

/* "a, b, c" into buf. */
static void join(const char *const *words, size_t n, char *buf, size_t len)
{
	size_t pos = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && pos < len; i++) {
		int w = snprintf(buf + pos, len - pos, "%s%s", i ? ", " : "", words[i]);

		if (w < 0)
			break;
		pos += (size_t)w;
	}
}

weft_status weft_cfg_choice(const weft_cfg *map, const char *key, const char *const *choices,
			    const char *def, int *out)
{
	const weft_cfg *v;
	const char *want, *near;
	char list[1024], got[80], name[600], where[600];
	size_t n = 0;
	weft_status st;

	if (!choices || !out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "weft_cfg_choice: NULL choices or out");
	while (choices[n])
		n++;
	join(choices, n, list, sizeof(list));
	st = lookup(map, key, &v);
	if (st != WEFT_OK)
		return st;
	if (!v && !def) {
		weft_cfg_where(map, where, sizeof(where));
		cfg_name(map, name, sizeof(name));
		return weft_error_set(WEFT_ERR_CONFIG, "%s: %s needs '%s', one of: %s", where, name,
				      key, list);
	}
	if (v && v->kind != WEFT_CFG_SCALAR)
		return weft_cfg_error(v, "must be one of: %s, got %s", list,
				      cfg_describe(v, got, sizeof(got)));
	want = v ? v->text : def;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(choices[i], want) == 0) {
			*out = (int)i;
			return WEFT_OK;
		}
	}
	if (!v)
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "weft_cfg_choice: default '%s' for '%s' is not one of: %s", def,
				      key, list);
	near = cfg_suggest(want, choices, n);
	if (near)
		return weft_cfg_error(v, "must be one of: %s, got '%s' (did you mean '%s'?)", list,
				      want, near);
	return weft_cfg_error(v, "must be one of: %s, got '%s'", list, want);
}
