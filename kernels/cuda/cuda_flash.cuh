/* cuda_flash.cuh - what cuda_flash.cu (the table members; the scalar
 * kernels of every dtype and head size) and the tensor-core kernels of
 * 16-bit storage at head sizes 64 and 128 (cuda_flash_mma_fwd.cu, the
 * forward; cuda_flash_mma_bwd.cu, the backward) share. */
#ifndef WEFT_CUDA_FLASH_CUH
#define WEFT_CUDA_FLASH_CUH

#include "cuda_impl.h"

/* The sizes of a flash call in messages: FLASH_FMT with FLASH_ARGS (dt, B,
 * T, nh, nkv and hs in scope), or both as SIZES_FLASH. */
#define FLASH_FMT "%s B %lld T %lld nh %lld nkv %lld hs %lld"
#define FLASH_ARGS cuda_dt_name(dt), (long long)B, (long long)T, (long long)nh, \
	(long long)nkv, (long long)hs
#define SIZES_FLASH FLASH_FMT, FLASH_ARGS

/* 1 when the tensor-core kernels take dt and hs on c's device (current,
 * after cuda_need_ctx): BF16 or F16 storage, hs 64 or 128, and this
 * library's code for the device built for sm_80 or later (bf16 mma.sync;
 * asked of the runtime once per context); 0 sends the call to the scalar
 * kernels. */
int cuda_flash_tc_takes(cuda_ctx *c, weft_dtype dt, int64_t hs);

/* flash_attention_forward on tensor cores (sizes checked by the caller,
 * cuda_flash_tc_takes(c, dt, hs) true, qkv and out 16-byte aligned). `name`
 * names the member in errors. */
weft_status cuda_flash_tc_forward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t B,
				  int64_t T, int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				  void *out, float *lse);

/* flash_attention_backward on tensor cores (cuda_flash_mma_bwd.cu; sizes
 * checked by the caller, cuda_flash_tc_takes(c, dt, hs) true, qkv, out, dout
 * and dqkv 16-byte aligned): the dQ pass, which also writes D (F32,
 * (B, nh, T)) = rowsum(dout * out), then the dK/dV pass, each adding into
 * dqkv (write 1: each writing its part of dqkv, which it does not read;
 * the two passes cover every element once). */
weft_status cuda_flash_tc_backward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t B,
				   int64_t T, int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				   const void *out, const float *lse, float *D, const void *dout,
				   void *dqkv, int write);

#endif /* WEFT_CUDA_FLASH_CUH */
