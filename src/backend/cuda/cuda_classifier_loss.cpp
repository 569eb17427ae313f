// cuda backend: the fused classifier + cross-entropy (llm.c's fused classifier; semantics of
// src/backend/cpu/cpu_transformer.h). For each block of rows: logits [R, V] = h_blk w^T into
// f32 scratch (cuBLAS, cuda_gemm.h), the softmax rows in place (cuda_classifier_loss.cu),
// then, in training, dh_blk = dlogits w and dw += dlogits^T h_blk, with dlogits in the data
// dtype for bf16/f16 (tensor cores, as llm.c keeps it in the compute dtype) and the f32
// scratch itself for f32. The 16-bit copy holds the gradient times N (the row count), which
// the two products divide out (alpha 1 / N): the mean's 1 / N would put most of f16's
// gradients below its normal range; a loss scale (grad_scale) replaces that factor. Nothing
// waits for the device: the loss goes to metrics.
#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_transformer_kernels.h"

namespace tandem::ops {

namespace {

constexpr int64_t kBlockBytes = int64_t{128} << 20;

// Rows per block of logits: at most 128 MiB of f32 scratch, at least 1 row.
int64_t classifier_block_rows(int64_t vocab) {
  return std::max<int64_t>(1, kBlockBytes / (static_cast<int64_t>(sizeof(float)) * std::max<int64_t>(vocab, 1)));
}

}  // namespace

// The cuda backend's op (tandem/transformer_ops.h; arguments checked by the front end).
void CudaBackend::classifier_cross_entropy(const Tensor& h, const Tensor& w, const Tensor& targets,
                                           int64_t ignore_index, float grad_loss, const Tensor& dh, const Tensor& dw,
                                           bool accumulate, const Tensor& metrics, const Tensor& grad_scale) {
  CudaOpScope s("classifier_cross_entropy", {&h, &w, &targets, &grad_scale}, {&dh, &dw, &metrics});
  const int64_t n = h.size(0), c = h.size(1), v = w.size(0);
  const DType dt = h.dtype();
  const bool grad = dh.defined() || dw.defined(), i64 = targets.dtype() == DType::i64, f32 = dt == DType::f32;
  // A loss scale (grad_scale[0], read by the kernel) keeps the 16-bit gradient in range itself.
  const float e_scale = grad_scale.defined() ? 1.0f : static_cast<float>(std::max<int64_t>(n, 1));
  const auto* gscale = grad_scale.defined() ? static_cast<const float*>(grad_scale.raw_data()) : nullptr;
  const int64_t block = std::min(classifier_block_rows(v), std::max<int64_t>(n, 1));
  const size_t esize = dtype_size(dt), tsize = dtype_size(targets.dtype());
  CudaScratch counted(s.device, 2 * sizeof(int64_t));
  CudaScratch logits(s.device, static_cast<size_t>(block * v) * sizeof(float));
  CudaScratch grad_e(s.device, dt != DType::f32 && grad ? static_cast<size_t>(block * v) * esize : 1);
  CudaScratch rows_out(s.device, static_cast<size_t>(std::max<int64_t>(n, 1)) * (sizeof(double) + 1));
  auto* row_loss = static_cast<double*>(rows_out.get());
  auto* row_correct = reinterpret_cast<uint8_t*>(row_loss + std::max<int64_t>(n, 1));
  auto* cnt = static_cast<int64_t*>(counted.get());
  auto* z = static_cast<float*>(logits.get());
  TD_CUDA(cuda_kernels::classifier_count(targets.raw_data(), i64, n, v, ignore_index, cnt, s.stream));
  if (dw.defined() && !accumulate && (n == 0 || c == 0))
    TD_CUDA(cudaMemsetAsync(dw.raw_data(), 0, dw.nbytes(), s.stream));
  const auto* hp = static_cast<const char*>(h.raw_data());
  const auto* tp = static_cast<const char*>(targets.raw_data());
  for (int64_t r0 = 0; r0 < n && c > 0; r0 += block) {
    const int64_t rows = std::min(block, n - r0);
    const void* hb = hp + static_cast<size_t>(r0 * c) * esize;
    // logits [rows, V] = h_blk [rows, C] w^T (column-major: logits^T = op_T(w) h_blk^T)
    cuda_gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, v, rows, c, dt, w.raw_data(), c, hb, c, 0.0f, DType::f32, z, v);
    TD_CUDA(cuda_kernels::classifier_rows(z, tp + static_cast<size_t>(r0) * tsize, i64, rows, v, cnt, grad_loss, gscale, grad,
                                          elem(h), f32 ? nullptr : grad_e.get(), e_scale, row_loss + r0,
                                          row_correct + r0, s.stream));
    if (!grad) continue;
    const void* dl = f32 ? static_cast<const void*>(z) : grad_e.get();
    const float alpha = f32 ? 1.0f : 1.0f / e_scale;
    if (dh.defined())  // dh_blk [rows, C] = dl [rows, V] w [V, C]
      cuda_gemm(s, CUBLAS_OP_N, CUBLAS_OP_N, c, rows, v, dt, w.raw_data(), c, dl, v, 0.0f, dt,
                static_cast<char*>(dh.raw_data()) + static_cast<size_t>(r0 * c) * esize, c, alpha);
    if (dw.defined())  // dw [V, C] (+)= dl^T h_blk
      cuda_gemm(s, CUBLAS_OP_N, CUBLAS_OP_T, c, v, rows, dt, hb, c, dl, v, accumulate || r0 > 0 ? 1.0f : 0.0f,
                DType::f32, dw.raw_data(), c, alpha);
  }
  if (metrics.defined())
    TD_CUDA(cuda_kernels::classifier_metrics(row_loss, row_correct, n, cnt, out_f32(metrics), s.stream));
}

}  // namespace tandem::ops
