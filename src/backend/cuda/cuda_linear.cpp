// Linear layers with cuBLAS: f32 with sgemm (default math mode: no TF32); bf16 and f16 with
// cublasGemmEx (A and B CUDA_R_16BF / CUDA_R_16F on tensor cores, CUBLAS_COMPUTE_32F, f32
// scale factors). The bf16/f16 forward accumulates into f32 scratch and adds the f32 bias
// before the one rounding to the output dtype; dx is rounded by cuBLAS (C in the data dtype);
// dw is written in f32 (C CUDA_R_32F), never rounded to 16 bits. tandem's tensors are
// row-major; a row-major [r, c] matrix is a column-major [c, r] one, so each product below
// is written for cuBLAS's column-major view.
#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_kernels.h"

namespace tandem::ops {

// y [N, out] = x [N, in] w[out, in]^T + b: column-major y^T = w^T' x^T with w^T' = op_T(w as [in, out]).
void CudaBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  CudaOpScope s("linear_forward", {&x, &w, &b}, {&y});
  const int64_t n = x.size(0), in = x.size(1), out = w.size(0);
  const DType d = x.dtype();
  if (d == DType::f32) {
    cuda_gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, d, w.raw_data(), in, x.raw_data(), in, 0.0f, d, y.raw_data(), out);
    if (b.defined()) TD_CUDA(cuda_kernels::add_row_bias(out_f32(y), in_f32(b), n, out, s.stream));
    return;
  }
  if (!b.defined()) {  // rounded once by cuBLAS
    cuda_gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, d, w.raw_data(), in, x.raw_data(), in, 0.0f, d, y.raw_data(), out);
    return;
  }
  CudaScratch acc(s.device, static_cast<size_t>(std::max<int64_t>(n * out, 1)) * sizeof(float));
  cuda_gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, d, w.raw_data(), in, x.raw_data(), in, 0.0f, DType::f32, acc.get(),
       out);
  TD_CUDA(cuda_kernels::bias_store(elem(y), static_cast<const float*>(acc.get()), in_f32(b), y.raw_data(), n, out,
                                   s.stream));
}

// dx [N, in] = dy [N, out] w [out, in]: column-major dx^T = w^T dy^T.
void CudaBackend::linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) {
  CudaOpScope s("linear_backward_data", {&dy, &w}, {&dx});
  const int64_t n = dy.size(0), out = dy.size(1), in = w.size(1);
  cuda_gemm(s, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, dy.dtype(), w.raw_data(), in, dy.raw_data(), out, 0.0f, dx.dtype(),
       dx.raw_data(), in);
}

// dw [out, in] = dy^T x: column-major dw^T = x^T dy; db [out] = column sums of dy.
void CudaBackend::linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                                          bool accumulate) {
  CudaOpScope s("linear_backward_weights", {&x, &dy}, {&dw, &db});
  const int64_t n = x.size(0), in = x.size(1), out = dy.size(1);
  cuda_gemm(s, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, x.dtype(), x.raw_data(), in, dy.raw_data(), out,
       accumulate ? 1.0f : 0.0f, DType::f32, dw.raw_data(), in);
  if (db.defined())
    TD_CUDA(cuda_kernels::sum_rows(elem(dy), dy.raw_data(), out_f32(db), n, out, accumulate, s.stream));
}

// The [in, out] weight layout (tandem/transformer_ops.h), with the other transposes.
// y [N, out] = x [N, in] w [in, out] + b: column-major y^T = w' x^T with w' = w as [out, in].
void CudaBackend::linear_in_out_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  CudaOpScope s("linear_in_out_forward", {&x, &w, &b}, {&y});
  const int64_t n = x.size(0), in = x.size(1), out = w.size(1);
  const DType d = x.dtype();
  if (d == DType::f32 || !b.defined()) {  // 16-bit without bias: rounded once by cuBLAS
    cuda_gemm(s, CUBLAS_OP_N, CUBLAS_OP_N, out, n, in, d, w.raw_data(), out, x.raw_data(), in, 0.0f, d, y.raw_data(),
              out);
    if (b.defined()) TD_CUDA(cuda_kernels::add_row_bias(out_f32(y), in_f32(b), n, out, s.stream));
    return;
  }
  CudaScratch acc(s.device, static_cast<size_t>(std::max<int64_t>(n * out, 1)) * sizeof(float));
  cuda_gemm(s, CUBLAS_OP_N, CUBLAS_OP_N, out, n, in, d, w.raw_data(), out, x.raw_data(), in, 0.0f, DType::f32,
            acc.get(), out);
  TD_CUDA(cuda_kernels::bias_store(elem(y), static_cast<const float*>(acc.get()), in_f32(b), y.raw_data(), n, out,
                                   s.stream));
}

// dx [N, in] = dy [N, out] w^T: column-major dx^T = op_T(w') dy^T.
void CudaBackend::linear_in_out_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) {
  CudaOpScope s("linear_in_out_backward_data", {&dy, &w}, {&dx});
  const int64_t n = dy.size(0), out = dy.size(1), in = w.size(0);
  cuda_gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, in, n, out, dy.dtype(), w.raw_data(), out, dy.raw_data(), out, 0.0f,
            dx.dtype(), dx.raw_data(), in);
}

// dw [in, out] = x^T dy: column-major dw^T = dy^T op_T(x^T); db [out] = column sums of dy.
void CudaBackend::linear_in_out_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw,
                                                 const Tensor& db, bool accumulate) {
  CudaOpScope s("linear_in_out_backward_weights", {&x, &dy}, {&dw, &db});
  const int64_t n = x.size(0), in = x.size(1), out = dy.size(1);
  cuda_gemm(s, CUBLAS_OP_N, CUBLAS_OP_T, out, in, n, x.dtype(), dy.raw_data(), out, x.raw_data(), in,
            accumulate ? 1.0f : 0.0f, DType::f32, dw.raw_data(), out);
  if (db.defined())
    TD_CUDA(cuda_kernels::sum_rows(elem(dy), dy.raw_data(), out_f32(db), n, out, accumulate, s.stream));
}

}  // namespace tandem::ops
