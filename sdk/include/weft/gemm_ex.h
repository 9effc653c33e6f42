/* weft/gemm_ex.h - the epilogues of the kernel table's gemm_lowp_ex (a
 * linear layer's product with 16-bit operands and a fused epilogue), the
 * check of its arguments every kernel library makes (weft_gemm_ex_check,
 * over ABI 1.6's weft_gemm_ex_misuse), and which epilogues
 * a table takes, for the member contract (weft_kernel_table.gemm_lowp_ex)
 * they serve; the epilogue values themselves are in weft/kernels.h. */
#ifndef WEFT_GEMM_EX_H
#define WEFT_GEMM_EX_H

#include "weft/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The mask (1u << WEFT_EPI_*) of the epilogues k's gemm_lowp_ex takes:
 * its gemm_lowp_ex_epilogues (since ABI 1.7), or ABI 1.6's three for a
 * table built before it or that leaves the member 0; 0 when the table has
 * no gemm_lowp_ex. */
static inline uint32_t weft_gemm_ex_epilogues(const weft_kernel_table *k)
{
	if (!WEFT_HAS_MEMBER(k, weft_kernel_table, gemm_lowp_ex) || !k->gemm_lowp_ex)
		return 0;
	if (!WEFT_HAS_MEMBER(k, weft_kernel_table, gemm_lowp_ex_epilogues) ||
	    !k->gemm_lowp_ex_epilogues)
		return WEFT_GEMM_EX_EPILOGUES_1_6;
	return k->gemm_lowp_ex_epilogues;
}

/* The arguments of gemm_lowp_ex that its contract refuses whatever the
 * device (since ABI 1.7): weft_gemm_ex_misuse's rules (weft/kernels.h,
 * ABI 1.6's) for every epilogue but WEFT_EPI_BGRAD, which takes those of
 * WEFT_EPI_NONE (dtypes, beta 0 or 1) and its own: no bias, alpha 1, aux
 * (the bias gradient, written or added to) given. NULL when the arguments
 * agree with the contract, else advice with *status the error to return,
 * as weft_gemm_ex_misuse. Every kernel library built against 1.7 calls
 * this one. */
static inline const char *weft_gemm_ex_check(uint32_t in_dts, weft_dtype in_dt,
					     weft_dtype c_dt, float alpha, float beta,
					     int32_t epilogue, const float *bias, const void *aux,
					     weft_status *status)
{
	const char *bad;

	if (epilogue < WEFT_EPI_NONE || epilogue > WEFT_EPI_BGRAD) {
		*status = WEFT_ERR_INVALID_ARG;
		return "unknown epilogue: pass WEFT_EPI_NONE, WEFT_EPI_GELU, WEFT_EPI_DGELU or "
		       "WEFT_EPI_BGRAD";
	}
	if (epilogue != WEFT_EPI_BGRAD && beta == 1.0f && epilogue != WEFT_EPI_NONE) {
		/* 1.6's rule, with 1.7's second epilogue that accumulates */
		if ((bad = weft_gemm_ex_misuse(in_dts, in_dt, c_dt, 0.0f, WEFT_EPI_NONE, NULL,
					       NULL, status)))
			return bad;
		*status = WEFT_ERR_INVALID_ARG;
		return "beta 1 (accumulating into C) goes with WEFT_EPI_NONE or WEFT_EPI_BGRAD "
		       "only: pass beta 0";
	}
	if (epilogue != WEFT_EPI_BGRAD)
		return weft_gemm_ex_misuse(in_dts, in_dt, c_dt, beta, epilogue, bias, aux, status);
	if ((bad = weft_gemm_ex_misuse(in_dts, in_dt, c_dt, beta, WEFT_EPI_NONE, NULL, NULL,
				       status)))
		return bad;
	*status = WEFT_ERR_INVALID_ARG;
	if (bias)
		return "WEFT_EPI_BGRAD takes no bias (it writes the bias gradient to aux): pass "
		       "bias NULL";
	if (alpha != 1.0f)
		return "WEFT_EPI_BGRAD sums op(A) unscaled, so the product must be too: pass "
		       "alpha 1";
	if (!aux)
		return "WEFT_EPI_BGRAD writes the bias gradient (m F32 elements) to aux: pass it";
	*status = WEFT_OK;
	return NULL;
}

#ifdef __cplusplus
}
#endif

#endif /* WEFT_GEMM_EX_H */
