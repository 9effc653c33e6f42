/* weft_test.h - the tiny assertion layer every C test uses.
 *
 * A failed check prints file:line, the expression and the values, and
 * makes the test exit non-zero at the end (checks go on, so one run shows
 * every failure). Use WT_REQUIRE when continuing makes no sense.
 */
#ifndef WEFT_TEST_H
#define WEFT_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wt_failures;
static int wt_checks;

#define WT_CHECK(cond)                                                              \
	do {                                                                        \
		wt_checks++;                                                        \
		if (!(cond)) {                                                      \
			wt_failures++;                                              \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                             \
		}                                                                   \
	} while (0)

#define WT_REQUIRE(cond)                                                            \
	do {                                                                        \
		wt_checks++;                                                        \
		if (!(cond)) {                                                      \
			fprintf(stderr, "%s:%d: required check failed: %s\n", __FILE__, \
				__LINE__, #cond);                                   \
			exit(1);                                                    \
		}                                                                   \
	} while (0)

/* A status call that must succeed; prints the last error when it does not. */
#define WT_OK(call)                                                                 \
	do {                                                                        \
		weft_status wt_st_ = (call);                                        \
		wt_checks++;                                                        \
		if (wt_st_ != WEFT_OK) {                                            \
			fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, \
				#call, weft_status_str(wt_st_), weft_error_last()); \
			exit(1);                                                    \
		}                                                                   \
	} while (0)

/* A call that must fail with `want`, its message containing each of the
 * NULL-terminated substrings that follow. */
#define WT_FAILS(call, want, ...)                                                   \
	do {                                                                        \
		weft_status wt_st_ = (call);                                        \
		const char *wt_subs_[] = { __VA_ARGS__, NULL };                     \
		wt_checks++;                                                        \
		if (wt_st_ != (want)) {                                             \
			wt_failures++;                                              \
			fprintf(stderr, "%s:%d: %s gave '%s' (%s), expected '%s'\n", \
				__FILE__, __LINE__, #call, weft_status_str(wt_st_),  \
				weft_error_last(), weft_status_str(want));          \
		} else {                                                            \
			for (int wt_i_ = 0; wt_subs_[wt_i_]; wt_i_++) {             \
				if (!strstr(weft_error_last(), wt_subs_[wt_i_])) {  \
					wt_failures++;                              \
					fprintf(stderr, "%s:%d: message '%s' lacks '%s'\n", \
						__FILE__, __LINE__, weft_error_last(), \
						wt_subs_[wt_i_]);                   \
				}                                                   \
			}                                                           \
		}                                                                   \
	} while (0)

/* |a - b| <= atol + rtol * |b| */
#define WT_CLOSE(a, b, rtol, atol)                                                  \
	do {                                                                        \
		double wt_a_ = (double)(a), wt_b_ = (double)(b);                    \
		wt_checks++;                                                        \
		if (!(fabs(wt_a_ - wt_b_) <= (atol) + (rtol) * fabs(wt_b_))) {      \
			wt_failures++;                                              \
			fprintf(stderr, "%s:%d: %s = %.9g not close to %s = %.9g "   \
				"(rtol %g, atol %g)\n", __FILE__, __LINE__, #a, wt_a_, \
				#b, wt_b_, (double)(rtol), (double)(atol));         \
		}                                                                   \
	} while (0)

#define WT_STR_CONTAINS(hay, needle)                                                \
	do {                                                                        \
		wt_checks++;                                                        \
		if (!(hay) || !strstr((hay), (needle))) {                           \
			wt_failures++;                                              \
			fprintf(stderr, "%s:%d: '%s' lacks '%s'\n", __FILE__, __LINE__, \
				(hay) ? (hay) : "(null)", (needle));                \
		}                                                                   \
	} while (0)

/* Ends main(): prints a summary and returns the exit status. */
static inline int wt_done(const char *name)
{
	if (wt_checks == 0) {
		fprintf(stderr, "%s: no checks ran\n", name);
		return 1;
	}
	fprintf(stderr, "%s: %d checks, %d failed\n", name, wt_checks, wt_failures);
	return wt_failures ? 1 : 0;
}

#endif /* WEFT_TEST_H */
