// Matrix products on cuBLAS for the cuda backend's ops (cuda_gemm.h).
#include "backend/cuda/cuda_gemm.h"

#include <mutex>

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

}  // namespace

void cuda_gemm(const CudaOpScope& s, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
               DType ab, const void* a, int64_t lda, const void* b, int64_t ldb, float beta, DType ct, void* c,
               int64_t ldc, float alpha) {
  auto& bl = blas(s);
  std::lock_guard<std::mutex> lock(bl.mu);
  TD_CUBLAS(cublasSetStream(bl.handle, s.stream));
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

}  // namespace tandem::ops
