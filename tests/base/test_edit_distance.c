/* weft_edit_distance: the "did you mean" distance of config keys and
 * plugin names. Each expected value is the hand-counted number of edits. */
#include <string.h>

#include "base/edit_distance.h"
#include "weft_test.h"

int main(void)
{
	char longest[WEFT_EDIT_DISTANCE_MAX_LEN + 2];

	WT_CHECK(weft_edit_distance("", "") == 0);
	WT_CHECK(weft_edit_distance("", "abc") == 3);
	WT_CHECK(weft_edit_distance("abc", "") == 3);
	/* one deletion */
	WT_CHECK(weft_edit_distance("strategy", "stratgy") == 1);
	/* a swap of two neighbours is one edit, not two substitutions */
	WT_CHECK(weft_edit_distance("trainr", "trianr") == 1);
	WT_CHECK(weft_edit_distance("wieght_decay", "weight_decay") == 1);
	/* k->s, e->i, +g */
	WT_CHECK(weft_edit_distance("kitten", "sitting") == 3);
	/* case does not count */
	WT_CHECK(weft_edit_distance("Adam", "adam") == 0);
	WT_CHECK(weft_edit_distance("ZeRo_2", "zero2") == 1);
	/* symmetric */
	WT_CHECK(weft_edit_distance("lion", "adamw") == weft_edit_distance("adamw", "lion"));
	/* at the limit it is computed; one past it, never */
	memset(longest, 'a', WEFT_EDIT_DISTANCE_MAX_LEN);
	longest[WEFT_EDIT_DISTANCE_MAX_LEN] = '\0';
	WT_CHECK(weft_edit_distance(longest, "") == WEFT_EDIT_DISTANCE_MAX_LEN);
	longest[WEFT_EDIT_DISTANCE_MAX_LEN] = 'a';
	longest[WEFT_EDIT_DISTANCE_MAX_LEN + 1] = '\0';
	WT_CHECK(weft_edit_distance(longest, "a") == (size_t)-1);
	WT_CHECK(weft_edit_distance("a", longest) == (size_t)-1);
	return wt_done("test_edit_distance");
}
