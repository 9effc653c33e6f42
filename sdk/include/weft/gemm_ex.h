/* weft/gemm_ex.h - the epilogues of the kernel table's gemm_lowp_ex (a
 * linear layer's product with 16-bit operands and a fused epilogue), the
 * check of its arguments every kernel library makes, and which epilogues
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
 * device (since ABI 1.6; alpha and BGRAD's rules since ABI 1.7), checked
 * the same way by every kernel library: NULL when in_dt (one of the mask
 * `in_dts`, the dtypes the device takes), c_dt, alpha, beta, epilogue,
 * bias and aux agree with the contract; else advice (a static string:
 * what was wrong and what to pass), with *status the error to return. The
 * caller puts its device and the member's name in front, and the values
 * after. aux is required by GELU (written), DGELU (read) and BGRAD (the
 * bias gradient, written or added to). */
static inline const char *weft_gemm_ex_misuse(uint32_t in_dts, weft_dtype in_dt,
					      weft_dtype c_dt, float alpha, float beta,
					      int32_t epilogue, const float *bias,
					      const void *aux, weft_status *status)
{
	*status = WEFT_ERR_DTYPE;
	if ((unsigned)in_dt >= 32u || !(in_dts & WEFT_DTYPE_BIT(in_dt)))
		return "in_dt is not a 16-bit dtype this device takes: pass BF16 or F16 "
		       "operands (F32 ones go to gemm)";
	if (c_dt != WEFT_F32 && c_dt != in_dt)
		return "c_dt must be F32 or in_dt";
	*status = WEFT_ERR_INVALID_ARG;
	if (epilogue < WEFT_EPI_NONE || epilogue > WEFT_EPI_BGRAD)
		return "unknown epilogue: pass WEFT_EPI_NONE, WEFT_EPI_GELU, WEFT_EPI_DGELU or "
		       "WEFT_EPI_BGRAD";
	if (beta != 0.0f && beta != 1.0f)
		return "beta must be 0 (C not read) or 1 (C accumulated)";
	if (beta != 0.0f && epilogue != WEFT_EPI_NONE && epilogue != WEFT_EPI_BGRAD)
		return "beta 1 (accumulating into C) goes with WEFT_EPI_NONE or WEFT_EPI_BGRAD "
		       "only: pass beta 0";
	if (bias && epilogue == WEFT_EPI_DGELU)
		return "WEFT_EPI_DGELU takes no bias: pass bias NULL (the bias gradient is "
		       "sum_rows_lowp of the result)";
	if (bias && epilogue == WEFT_EPI_BGRAD)
		return "WEFT_EPI_BGRAD takes no bias (it writes the bias gradient to aux): pass "
		       "bias NULL";
	if (alpha != 1.0f && epilogue == WEFT_EPI_BGRAD)
		return "WEFT_EPI_BGRAD sums op(A) unscaled, so the product must be too: pass "
		       "alpha 1";
	if (!aux && epilogue == WEFT_EPI_BGRAD)
		return "WEFT_EPI_BGRAD writes the bias gradient (m F32 elements) to aux: pass it";
	if (!aux && epilogue != WEFT_EPI_NONE)
		return "WEFT_EPI_GELU writes and WEFT_EPI_DGELU reads aux (the pre-activation, "
		       "C's dtype and leading dimension): pass it";
	*status = WEFT_OK;
	return NULL;
}

#ifdef __cplusplus
}
#endif

#endif /* WEFT_GEMM_EX_H */
