// Internal: matrix products on cuBLAS for the cuda backend's ops (linear layers, the fused
// classifier): f32 with sgemm (default math mode: no TF32); bf16 and f16 operands with
// cublasGemmEx on tensor cores, CUBLAS_COMPUTE_32F, C in f32 or the operands' dtype. One
// cuBLAS handle per device and stream (stream_handle in cuda_backend.h).
// cuBLAS is column-major: a row-major [r, c] matrix is a column-major [c, r] one, so callers
// write each row-major product for cuBLAS's view.
// Thread-safety: as stream_handle: calls on one handle are serialised.
#pragma once

#include <cublas_v2.h>

#include <cstdint>

#include "backend/cuda/cuda_backend.h"

namespace tandem::ops {

/// C (m x n, ld ldc, column-major) = alpha op(A) op(B) + beta C with A and B of dtype `ab` and
/// C of dtype `ct` (f32 everything: sgemm; otherwise cublasGemmEx with f32 compute), on the
/// scope's stream. k == 0 gives beta * C (zeros for beta 0).
void cuda_gemm(const CudaOpScope& s, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
               DType ab, const void* a, int64_t lda, const void* b, int64_t ldb, float beta, DType ct, void* c,
               int64_t ldc, float alpha = 1.0f);

}  // namespace tandem::ops
