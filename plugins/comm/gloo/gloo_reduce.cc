/* The float loops of the reductions, shared by the collectives over Gloo
 * (gloo_ops.cc) and over shared memory (gloo_shm.cc); built at -O3 like
 * both (see CMakeLists.txt). */
#include <cstddef>

#include "gloo_impl.h"

namespace weft_gloo {

/* The float loops of every bucket's reduction and average, in a version
 * per x86-64 level (the plugin builds for the baseline, whose SSE2 adds
 * and divides 4 floats at a time): elementwise IEEE operations, so each
 * version gives the same bits. */
#if defined(__x86_64__) && defined(__GNUC__)
#define GLOO_HOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GLOO_HOT
#endif

GLOO_HOT void add_f32(float *out, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = a[i] + b[i];
}

GLOO_HOT void divide_f32(float *p, size_t n, float d)
{
	for (size_t i = 0; i < n; i++)
		p[i] = p[i] / d;
}

}  // namespace weft_gloo
