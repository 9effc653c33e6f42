/* Optimal string alignment distance (base/edit_distance.h): the
 * Levenshtein recurrence over three rolling rows, the oldest one for the
 * transposition of two neighbours. */
#include <ctype.h>
#include <string.h>

#include "base/edit_distance.h"

size_t weft_edit_distance(const char *a, const char *b)
{
	size_t rows[3][WEFT_EDIT_DISTANCE_MAX_LEN + 1];
	size_t la = strlen(a), lb = strlen(b);
	size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2];

	if (la > WEFT_EDIT_DISTANCE_MAX_LEN || lb > WEFT_EDIT_DISTANCE_MAX_LEN)
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
