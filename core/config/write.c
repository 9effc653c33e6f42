/* The config as block-style YAML, and its hash.
 *
 * The text is canonical: keys in document order, two-space indents,
 * scalars plain when that reads back as the same text and double-quoted
 * otherwise. So two configs with the same tree give the same text (and
 * hash) however they were written, and the text parses back to the tree.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_impl.h"

struct sb {
	char *buf;
	size_t len, cap;
	int oom;
};

static void sb_put(struct sb *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *buf;

		while (b->len + n + 1 > cap)
			cap *= 2;
		buf = realloc(b->buf, cap);
		if (!buf) {
			b->oom = 1;
			return;
		}
		b->buf = buf;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, s, n);
	b->len += n;
	b->buf[b->len] = '\0';
}

static void sb_str(struct sb *b, const char *s)
{
	sb_put(b, s, strlen(s));
}

static void sb_pad(struct sb *b, size_t n)
{
	static const char spaces[] = "                                ";

	while (n) {
		size_t k = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;

		sb_put(b, spaces, k);
		n -= k;
	}
}

/* Whether `s` can be written without quotes and read back as the same
 * string (and not as null). Deliberately conservative. */
static int plain_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
	    !strcmp(s, "NULL"))
		return 0;
	if (s[n - 1] == ' ' || !strncmp(s, "---", 3) || !strncmp(s, "...", 3))
		return 0;
	if (!(isalnum((unsigned char)s[0]) || strchr("_./+$(", s[0]) ||
	      (s[0] == '-' && s[1] && s[1] != ' ')))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || strchr("_-./+$()=~^ ", s[i])))
			return 0;
	return 1;
}

/* Length of the UTF-8 sequence at s and its code point; 1 and the byte
 * for anything that is not a well-formed sequence. */
static size_t utf8_next(const unsigned char *s, unsigned *cp)
{
	size_t n;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0)
		n = 2, *cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, *cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, *cp = s[0] & 0x07;
	else
		goto out_raw;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			goto out_raw;
		*cp = (*cp << 6) | (s[i] & 0x3f);
	}
	return n;
out_raw:
	*cp = s[0];
	return 1;
}

static void put_quoted(struct sb *b, const char *text)
{
	const unsigned char *s = (const unsigned char *)text;
	char esc[16];

	sb_put(b, "\"", 1);
	while (*s) {
		unsigned cp;
		size_t n = utf8_next(s, &cp);

		if (cp == '"' || cp == '\\') {
			esc[0] = '\\';
			esc[1] = (char)cp;
			sb_put(b, esc, 2);
		} else if (cp == '\n') {
			sb_put(b, "\\n", 2);
		} else if (cp == '\t') {
			sb_put(b, "\\t", 2);
		} else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
			snprintf(esc, sizeof(esc), "\\x%02x", cp);
			sb_str(b, esc);
		} else if (cp == 0x2028 || cp == 0x2029 || cp == 0xfeff || cp >= 0xfffe) {
			/* line separators fold, a BOM and non-characters may not be
			 * read back as written: escape them */
			if (cp > 0xffff)
				snprintf(esc, sizeof(esc), "\\U%08x", cp);
			else
				snprintf(esc, sizeof(esc), "\\u%04x", cp);
			sb_str(b, esc);
		} else {
			sb_put(b, (const char *)s, n);
		}
		s += n;
	}
	sb_put(b, "\"", 1);
}

static void put_text(struct sb *b, const char *s)
{
	if (plain_ok(s))
		sb_str(b, s);
	else
		put_quoted(b, s);
}

static int is_block(const weft_cfg *node)
{
	return (node->kind == WEFT_CFG_MAP || node->kind == WEFT_CFG_SEQ) && node->n;
}

/* A leaf on the current line: a scalar, null, {} or []. */
static void put_leaf(struct sb *b, const weft_cfg *node)
{
	if (node->kind == WEFT_CFG_SCALAR)
		put_text(b, node->text);
	else if (node->kind == WEFT_CFG_MAP)
		sb_str(b, "{}");
	else if (node->kind == WEFT_CFG_SEQ)
		sb_str(b, "[]");
	else
		sb_str(b, "null");
	sb_put(b, "\n", 1);
}

/* A non-empty mapping or sequence at `indent`; with `inline_first` its
 * first line continues the current one (after "- "). */
static void put_block(struct sb *b, const weft_cfg *node, size_t indent, int inline_first)
{
	for (size_t i = 0; i < node->n; i++) {
		const weft_cfg *kid = node->kids[i];

		if (i || !inline_first)
			sb_pad(b, indent);
		if (node->kind == WEFT_CFG_MAP) {
			put_text(b, kid->key);
			sb_put(b, ":", 1);
			if (is_block(kid)) {
				sb_put(b, "\n", 1);
				put_block(b, kid, indent + 2, 0);
				continue;
			}
		} else {
			sb_put(b, "-", 1);
			if (is_block(kid)) {
				sb_put(b, " ", 1);
				put_block(b, kid, indent + 2, 1);
				continue;
			}
		}
		sb_put(b, " ", 1);
		put_leaf(b, kid);
	}
}

weft_status weft_config_to_string(const weft_config *cfg, char **out)
{
	struct sb b = { 0 };

	if (!cfg || !cfg->root || !out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "weft_config_to_string: NULL argument");
	*out = NULL;
	if (cfg->root->n)
		put_block(&b, cfg->root, 0, 0);
	else
		sb_str(&b, "{}\n");
	if (b.oom) {
		free(b.buf);
		return weft_error_set(WEFT_ERR_NOMEM, "config: out of memory writing YAML");
	}
	*out = b.buf;
	return WEFT_OK;
}

weft_status weft_config_write(const weft_config *cfg, FILE *out)
{
	char *text;
	weft_status st;

	if (!out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "weft_config_write: NULL stream");
	st = weft_config_to_string(cfg, &text);
	if (st != WEFT_OK)
		return st;
	if (fputs(text, out) == EOF || fflush(out) == EOF)
		st = weft_error_set(WEFT_ERR_IO, "writing the config as YAML failed: %s",
				    strerror(errno));
	free(text);
	return st;
}

uint64_t weft_config_hash(const weft_config *cfg)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 offset basis */
	char *text;

	if (weft_config_to_string(cfg, &text) != WEFT_OK)
		return 0;
	for (const unsigned char *s = (const unsigned char *)text; *s; s++) {
		h ^= *s;
		h *= 0x100000001b3ULL; /* FNV-1a 64 prime */
	}
	free(text);
	return h;
}
