// Linear layers with cuBLAS: f32 with sgemm (default math mode: no TF32); bf16 and f16 with
// cublasGemmEx (A and B CUDA_R_16BF / CUDA_R_16F on tensor cores, CUBLAS_COMPUTE_32F, f32
// scale factors). The bf16/f16 forward accumulates into f32 scratch and adds the f32 bias
// before the one rounding to the output dtype; dx is rounded by cuBLAS (C in the data dtype);
// dw is written in f32 (C CUDA_R_32F), never rounded to 16 bits. tandem's tensors are
// row-major; a row-major [r, c] matrix is a column-major [c, r] one, so each product below
// is written for cuBLAS's column-major view.
#include <cublas_v2.h>

#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/library_status.h"

#define TD_CUBLAS(call)                                                                        \
  do {                                                                                         \
    const cublasStatus_t td_st_ = (call);                                                      \
    if (td_st_ != CUBLAS_STATUS_SUCCESS)                                                       \
      ::tandem::cuda_detail::throw_library_error(                                              \
          ::tandem::cuda_detail::cublas_error_code(static_cast<int>(td_st_)), "cublas", #call,   \
          static_cast<int>(td_st_), cublasGetStatusString(td_st_));                              \
  } while (0)

namespace tandem::ops {
namespace {

static_assert(cuda_detail::cublas_status::alloc_failed == CUBLAS_STATUS_ALLOC_FAILED);
static_assert(cuda_detail::cublas_status::not_initialized == CUBLAS_STATUS_NOT_INITIALIZED);
static_assert(cuda_detail::cublas_status::arch_mismatch == CUBLAS_STATUS_ARCH_MISMATCH);

StreamHandle<cublasHandle_t>& blas(const CudaOpScope& s) {
  return stream_handle<cublasHandle_t>(s.device, s.stream, [](cublasHandle_t* h) { TD_CUBLAS(cublasCreate(h)); });
}

cudaDataType cublas_type(DType t) {
  return t == DType::bf16 ? CUDA_R_16BF : t == DType::f16 ? CUDA_R_16F : CUDA_R_32F;
}

// C (m x n, ld ldc) = alpha op(A) op(B) + beta C, column-major; A and B in `ab`, C in `ct`
// (f32 everything: sgemm; otherwise cublasGemmEx with f32 compute).
void gemm(const CudaOpScope& s, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
          DType ab, const void* a, int64_t lda, const void* b, int64_t ldb, float beta, DType ct, void* c,
          int64_t ldc) {
  auto& bl = blas(s);
  std::lock_guard<std::mutex> lock(bl.mu);
  TD_CUBLAS(cublasSetStream(bl.handle, s.stream));
  const float alpha = 1.0f;
  if (m == 0 || n == 0) return;
  if (k == 0) {  // cuBLAS requires k >= 1 for the product; the result is beta * C
    if (beta == 0.0f) TD_CUDA(cudaMemsetAsync(c, 0, static_cast<size_t>(m * n) * dtype_size(ct), s.stream));
    return;
  }
  if (ab == DType::f32 && ct == DType::f32) {
    TD_CUBLAS(cublasSgemm_64(bl.handle, ta, tb, m, n, k, &alpha, static_cast<const float*>(a), lda,
                             static_cast<const float*>(b), ldb, &beta, static_cast<float*>(c), ldc));
    return;
  }
  TD_CUBLAS(cublasGemmEx_64(bl.handle, ta, tb, m, n, k, &alpha, a, cublas_type(ab), lda, b, cublas_type(ab), ldb,
                            &beta, c, cublas_type(ct), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

// y [N, out] = x [N, in] w[out, in]^T + b: column-major y^T = w^T' x^T with w^T' = op_T(w as [in, out]).
void CudaBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  CudaOpScope s("linear_forward", {&x, &w, &b}, {&y});
  const int64_t n = x.size(0), in = x.size(1), out = w.size(0);
  const DType d = x.dtype();
  if (d == DType::f32) {
    gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, d, w.raw_data(), in, x.raw_data(), in, 0.0f, d, y.raw_data(), out);
    if (b.defined()) TD_CUDA(cuda_kernels::add_row_bias(out_f32(y), in_f32(b), n, out, s.stream));
    return;
  }
  if (!b.defined()) {  // rounded once by cuBLAS
    gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, d, w.raw_data(), in, x.raw_data(), in, 0.0f, d, y.raw_data(), out);
    return;
  }
  CudaScratch acc(s.device, static_cast<size_t>(std::max<int64_t>(n * out, 1)) * sizeof(float));
  gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, d, w.raw_data(), in, x.raw_data(), in, 0.0f, DType::f32, acc.get(),
       out);
  TD_CUDA(cuda_kernels::bias_store(elem(y), static_cast<const float*>(acc.get()), in_f32(b), y.raw_data(), n, out,
                                   s.stream));
}

// dx [N, in] = dy [N, out] w [out, in]: column-major dx^T = w^T dy^T.
void CudaBackend::linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) {
  CudaOpScope s("linear_backward_data", {&dy, &w}, {&dx});
  const int64_t n = dy.size(0), out = dy.size(1), in = w.size(1);
  gemm(s, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, dy.dtype(), w.raw_data(), in, dy.raw_data(), out, 0.0f, dx.dtype(),
       dx.raw_data(), in);
}

// dw [out, in] = dy^T x: column-major dw^T = x^T dy; db [out] = column sums of dy.
void CudaBackend::linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                                          bool accumulate) {
  CudaOpScope s("linear_backward_weights", {&x, &dy}, {&dw, &db});
  const int64_t n = x.size(0), in = x.size(1), out = dy.size(1);
  gemm(s, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, x.dtype(), x.raw_data(), in, dy.raw_data(), out,
       accumulate ? 1.0f : 0.0f, DType::f32, dw.raw_data(), in);
  if (db.defined())
    TD_CUDA(cuda_kernels::sum_rows(elem(dy), dy.raw_data(), out_f32(db), n, out, accumulate, s.stream));
}

}  // namespace tandem::ops
