// Linear layers with cuBLAS sgemm (FP32, default math mode: no TF32). tandem's tensors are
// row-major; a row-major [r, c] matrix is a column-major [c, r] one, so each product below
// is written for cuBLAS's column-major view.
#include <cublas_v2.h>

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

// C (m x n, ld ldc) = alpha op(A) op(B) + beta C, column-major.
void sgemm(const CudaOpScope& s, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
           const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  auto& bl = blas(s);
  std::lock_guard<std::mutex> lock(bl.mu);
  TD_CUBLAS(cublasSetStream(bl.handle, s.stream));
  const float alpha = 1.0f;
  if (m == 0 || n == 0) return;
  if (k == 0) {  // cuBLAS requires k >= 1 for the product; the result is beta * C
    if (beta == 0.0f) TD_CUDA(cudaMemsetAsync(c, 0, static_cast<size_t>(m * n) * sizeof(float), s.stream));
    return;
  }
  TD_CUBLAS(cublasSgemm_64(bl.handle, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc));
}

}  // namespace

// y [N, out] = x [N, in] w[out, in]^T + b: column-major y^T = w^T' x^T with w^T' = op_T(w as [in, out]).
void CudaBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  CudaOpScope s("linear_forward", {&x, &w, &b}, {&y});
  const int64_t n = x.size(0), in = x.size(1), out = w.size(0);
  sgemm(s, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, static_cast<const float*>(w.raw_data()), in,
        static_cast<const float*>(x.raw_data()), in, 0.0f, static_cast<float*>(y.raw_data()), out);
  if (b.defined())
    TD_CUDA(cuda_kernels::add_row_bias(static_cast<float*>(y.raw_data()), static_cast<const float*>(b.raw_data()),
                                       n, out, s.stream));
}

// dx [N, in] = dy [N, out] w [out, in]: column-major dx^T = w^T dy^T.
void CudaBackend::linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) {
  CudaOpScope s("linear_backward_data", {&dy, &w}, {&dx});
  const int64_t n = dy.size(0), out = dy.size(1), in = w.size(1);
  sgemm(s, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, static_cast<const float*>(w.raw_data()), in,
        static_cast<const float*>(dy.raw_data()), out, 0.0f, static_cast<float*>(dx.raw_data()), in);
}

// dw [out, in] = dy^T x: column-major dw^T = x^T dy; db [out] = column sums of dy.
void CudaBackend::linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                                          bool accumulate) {
  CudaOpScope s("linear_backward_weights", {&x, &dy}, {&dw, &db});
  const int64_t n = x.size(0), in = x.size(1), out = dy.size(1);
  sgemm(s, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, static_cast<const float*>(x.raw_data()), in,
        static_cast<const float*>(dy.raw_data()), out, accumulate ? 1.0f : 0.0f,
        static_cast<float*>(dw.raw_data()), in);
  if (db.defined())
    TD_CUDA(cuda_kernels::sum_rows(static_cast<const float*>(dy.raw_data()), static_cast<float*>(db.raw_data()), n,
                                   out, accumulate, s.stream));
}

}  // namespace tandem::ops
