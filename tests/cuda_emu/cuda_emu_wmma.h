/* cuda_emu_wmma.h - the CUDA C++ warp matrix API (nvcuda::wmma) for the
 * emulated kernels; cuda_emu.h includes it, so it is force-included with
 * it. Covers what weft's kernels use: 16x16x16 fragments of __nv_bfloat16
 * or __half (matrix_a, matrix_b, row- or column-major) with float
 * accumulators, fill_fragment, load_matrix_sync, store_matrix_sync and
 * mma_sync.
 *
 * The API leaves unspecified which lane of the warp holds which element
 * of a fragment. Here every lane holds the whole tile (x[] is the tile in
 * row-major order, num_elements 256), so code that is portable, relying
 * only on load/store/mma/fill and on element-wise operations applied
 * alike to every element, gives the right answer, and code that writes
 * one element per lane through x[] gets every element written by every
 * lane (wrong results, not a report).
 *
 * What real hardware requires is checked, with an EMU DEFECT report that
 * names the kernel and the call, then abort (a GPU faults or gives
 * garbage): the pointer of a load or store 256-bit (32-byte) aligned, ldm
 * a multiple of 8 elements for 16-bit types and of 4 for float; mma_sync
 * with every lane of the warp present (a warp barrier: a lane that has
 * returned is reported, one that waits elsewhere shows as a deadlock).
 * mma_sync computes the tile once per warp, products of the 16-bit
 * inputs summed in float in k order after the accumulator, and under
 * EMU_COUNTS adds 2 x 16 x 16 x 16 FLOPs of class tc16 to the running
 * kernel's count (emu_count.cpp). */
#ifndef WEFT_CUDA_EMU_WMMA_H
#define WEFT_CUDA_EMU_WMMA_H

#include <stddef.h>
#include <string.h>

#include <type_traits>

/* libemucuda (emu_wmma.cpp): the checks and the per-warp part. */
void emu_wmma_check(const char *call, const void *p, unsigned ldm, size_t elem_bytes);
float *emu_wmma_collective(const char *call, int *first);

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

static inline float emu_to_float(float v) { return v; }
static inline float emu_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
static inline float emu_to_float(__half v) { return __half2float(v); }

template <class T> static inline T emu_from_float(float v);
template <> inline float emu_from_float<float>(float v) { return v; }
template <> inline __nv_bfloat16 emu_from_float<__nv_bfloat16>(float v)
{
	return __float2bfloat16_rn(v);
}
template <> inline __half emu_from_float<__half>(float v) { return __float2half_rn(v); }

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
	static_assert(M == 16 && N == 16 && K == 16,
		      "cuda_emu_wmma.h emulates the 16x16x16 shape only");
	static_assert(std::is_same<Use, accumulator>::value ?
			      std::is_same<T, float>::value && std::is_same<Layout, void>::value :
			      (std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value) &&
				      !std::is_same<Layout, void>::value,
		      "cuda_emu_wmma.h: matrix_a/matrix_b of __nv_bfloat16 or __half with a layout, "
		      "accumulators of float");
	static const int num_elements = 256;
	T x[num_elements]; /* the whole tile, row-major (row = M or K index) */
};

template <class Use, int M, int N, int K, class T, class L, class V>
static inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, const V &v)
{
	T e = emu_from_float<T>(emu_to_float(v));

	for (int i = 0; i < 256; i++)
		f.x[i] = e;
}

/* Element (r, c) of the tile at p: row-major p[r ldm + c], column-major
 * p[c ldm + r]. */
template <class T, class S>
static inline void emu_wmma_load(T *dst, const S *p, unsigned ldm, bool col)
{
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 16; c++)
			dst[r * 16 + c] = col ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c];
}

template <class Use, int M, int N, int K, class T, class L>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, L> &f, const T *p, unsigned ldm)
{
	static_assert(!std::is_same<Use, accumulator>::value,
		      "load_matrix_sync of an accumulator takes a layout_t");
	emu_wmma_check("wmma::load_matrix_sync", p, ldm, sizeof(T));
	emu_wmma_load(f.x, p, ldm, std::is_same<L, col_major>::value);
}

template <int M, int N, int K>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, float> &f, const float *p,
				    unsigned ldm, layout_t layout)
{
	emu_wmma_check("wmma::load_matrix_sync", p, ldm, sizeof(float));
	emu_wmma_load(f.x, p, ldm, layout == mem_col_major);
}

template <int M, int N, int K>
static inline void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f,
				     unsigned ldm, layout_t layout)
{
	emu_wmma_check("wmma::store_matrix_sync", p, ldm, sizeof(float));
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 16; c++) {
			if (layout == mem_col_major)
				p[(size_t)c * ldm + r] = f.x[r * 16 + c];
			else
				p[(size_t)r * ldm + c] = f.x[r * 16 + c];
		}
}

/* d = a b + c; d may be c. */
template <int M, int N, int K, class T, class LA, class LB>
static inline void mma_sync(fragment<accumulator, M, N, K, float> &d,
			    const fragment<matrix_a, M, N, K, T, LA> &a,
			    const fragment<matrix_b, M, N, K, T, LB> &b,
			    const fragment<accumulator, M, N, K, float> &c)
{
	int first = 0;
	float *tile = emu_wmma_collective("wmma::mma_sync", &first);

	if (first)
		for (int r = 0; r < 16; r++)
			for (int n = 0; n < 16; n++) {
				float acc = c.x[r * 16 + n];

				for (int k = 0; k < 16; k++)
					acc += emu_to_float(a.x[r * 16 + k]) *
					       emu_to_float(b.x[k * 16 + n]);
				tile[r * 16 + n] = acc;
			}
	memcpy(d.x, tile, sizeof(d.x));
}

} /* namespace wmma */
} /* namespace nvcuda */

#endif
