/* The pre-tokenizer regexes of GPT-2, Llama 3 and Qwen 2, matched by hand.
 *
 * Each alternative of a pattern is tried in order at the current position,
 * as a backtracking regex engine does; the first that matches gives the
 * piece. Greedy runs and the one lookahead, \s+(?!\S), are resolved
 * without backtracking: a whitespace run followed by a non-space gives
 * back its last character (when it has more than one) to the next piece. */
#include "text/text_impl.h"

const char *const txt_pattern_source[3] = {
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
	"?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
	"?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* The end of the run of characters of class `cls` from i (at most `max`
 * of them; 0: no limit). */
static size_t run_of(const uint8_t *s, size_t n, size_t i, int cls, int max)
{
	int count = 0;

	while (i < n && (max == 0 || count < max)) {
		size_t len;

		if (txt_char_at(s, n, i, &len) != cls)
			break;
		i += len;
		count++;
	}
	return i;
}

/* The class of the character at i, or -1 past the end. */
static int class_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
	if (i >= n) {
		*len = 0;
		return -1;
	}
	return txt_char_at(s, n, i, len);
}

/* 's 't 're 've 'm 'll 'd at s[i] == '\''; case-insensitive (with the
 * long s, U+017F, folding to s) for Llama 3's pattern. The end, or 0. */
static size_t contraction(const uint8_t *s, size_t n, size_t i, int fold)
{
	uint8_t a, b;

	if (i + 1 >= n)
		return 0;
	a = s[i + 1];
	b = i + 2 < n ? s[i + 2] : 0;
	if (fold) {
		if (a == 0xc5 && b == 0xbf) /* U+017F LATIN SMALL LETTER LONG S */
			return i + 3;
		if (a >= 'A' && a <= 'Z')
			a = (uint8_t)(a - 'A' + 'a');
		if (b >= 'A' && b <= 'Z')
			b = (uint8_t)(b - 'A' + 'a');
	}
	if (a == 's' || a == 't' || a == 'm' || a == 'd')
		return i + 2;
	if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
		return i + 3;
	return 0;
}

/* Whitespace from i (s[i] is whitespace) for \s+(?!\S)|\s+, and with
 * Llama 3's \s*[\r\n]+ before them when `newlines`. */
static size_t spaces(const uint8_t *s, size_t n, size_t i, int newlines)
{
	size_t j = i, last = i, len, last_nl = (size_t)-1;
	int count = 0;

	while (j < n && txt_char_at(s, n, j, &len) == TXT_SPACE) {
		if (s[j] == '\r' || s[j] == '\n')
			last_nl = j;
		last = j;
		j += len;
		count++;
	}
	if (newlines && last_nl != (size_t)-1)
		return last_nl + 1;
	if (j == n || count == 1)
		return j;
	return last;
}

static size_t next_gpt2(const uint8_t *s, size_t n, size_t i)
{
	size_t len, len1, end;
	int c = class_at(s, n, i, &len), c1;

	if (s[i] == '\'' && (end = contraction(s, n, i, 0)))
		return end;
	if (s[i] == ' ') {
		c1 = class_at(s, n, i + 1, &len1);
		if (c1 == TXT_LETTER || c1 == TXT_NUMBER || c1 == TXT_OTHER)
			return run_of(s, n, i + 1, c1, 0);
	}
	if (c != TXT_SPACE)
		return run_of(s, n, i, c, 0);
	return spaces(s, n, i, 0);
}

static size_t next_llama3(const uint8_t *s, size_t n, size_t i, int max_digits)
{
	size_t len, len1, end, p;
	int c = class_at(s, n, i, &len), c1;

	if (s[i] == '\'' && (end = contraction(s, n, i, 1)))
		return end;
	/* [^\r\n\p{L}\p{N}]?\p{L}+ */
	if (c != TXT_LETTER && c != TXT_NUMBER && s[i] != '\r' && s[i] != '\n' &&
	    class_at(s, n, i + len, &len1) == TXT_LETTER)
		return run_of(s, n, i + len, TXT_LETTER, 0);
	if (c == TXT_LETTER)
		return run_of(s, n, i, TXT_LETTER, 0);
	/* \p{N}{1,3} */
	if (c == TXT_NUMBER)
		return run_of(s, n, i, TXT_NUMBER, max_digits);
	/*  ?[^\s\p{L}\p{N}]+[\r\n]* */
	p = i;
	if (s[i] == ' ' && class_at(s, n, i + 1, &len1) == TXT_OTHER)
		p = i + 1;
	c1 = class_at(s, n, p, &len1);
	if (c1 == TXT_OTHER) {
		end = run_of(s, n, p, TXT_OTHER, 0);
		while (end < n && (s[end] == '\r' || s[end] == '\n'))
			end++;
		return end;
	}
	return spaces(s, n, i, 1);
}

size_t txt_pretok_next(txt_pattern pat, const uint8_t *s, size_t n, size_t i)
{
	switch (pat) {
	case TXT_PAT_GPT2:
		return next_gpt2(s, n, i);
	case TXT_PAT_LLAMA3:
		return next_llama3(s, n, i, 3);
	default:
		return next_llama3(s, n, i, 1);
	}
}
