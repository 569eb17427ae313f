// cuda backend: softmax cross-entropy and accuracy (logits and dlogits f32, bf16 or f16; probs,
// loss and metrics f32). The forward and count_correct return a
// host value, so they synchronise the default stream; the forward's label check (a kernel and
// a 8-byte read) does too. softmax_cross_entropy_accumulate and the backward never synchronise:
// the accumulate op counts invalid labels into its metrics, and the backward's kernel ignores
// them (it runs after a forward that reported them).
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"

namespace tandem::ops {
namespace {

template <typename T>
T read_back(const CudaOpScope& s, const void* dev) {
  T v{};
  TD_CUDA(cudaMemcpyAsync(&v, dev, sizeof(T), cudaMemcpyDeviceToHost, s.stream));
  TD_CUDA(cudaStreamSynchronize(s.stream));
  return v;
}

void check_labels(const CudaOpScope& s, const char* op, const Tensor& labels, int64_t c) {
  const int64_t n = labels.numel();
  CudaScratch bad(s.device, sizeof(unsigned long long));
  auto* flag = static_cast<unsigned long long*>(bad.get());
  const auto* lab = static_cast<const int64_t*>(labels.raw_data());
  TD_CUDA(cuda_kernels::check_labels(lab, n, c, flag, s.stream));
  const auto row = read_back<unsigned long long>(s, flag);
  if (row != UINT64_MAX) {
    const auto label = read_back<int64_t>(s, lab + row);
    TD_CHECK_ARG(false, op, "label {} in row {} is outside [0, {})", label, row, c);
  }
}

}  // namespace

float CudaBackend::softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                                 const Tensor& probs) {
  constexpr const char* op = "softmax_cross_entropy_forward";
  CudaOpScope s(op, {&logits, &labels}, {&probs});
  const int64_t n = logits.size(0), c = logits.size(1);
  check_labels(s, op, labels, c);
  CudaScratch rows(s.device, static_cast<size_t>(n + 1) * sizeof(double));
  auto* row_loss = static_cast<double*>(rows.get());
  TD_CUDA(cuda_kernels::softmax_xent_forward(elem(logits), logits.raw_data(),
                                             static_cast<const int64_t*>(labels.raw_data()),
                                             static_cast<float*>(probs.raw_data()), row_loss, row_loss + n, n, c,
                                             label_smoothing, s.stream));
  return static_cast<float>(read_back<double>(s, row_loss + n));
}

void CudaBackend::softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels, float label_smoothing,
                                                 float grad_loss, const Tensor& dlogits) {
  constexpr const char* op = "softmax_cross_entropy_backward";
  CudaOpScope s(op, {&probs, &labels}, {&dlogits});
  const int64_t n = probs.size(0), c = probs.size(1);
  const float scale = n > 0 ? grad_loss / static_cast<float>(n) : 0.0f;
  TD_CUDA(cuda_kernels::softmax_xent_backward(elem(dlogits), static_cast<const float*>(probs.raw_data()),
                                              static_cast<const int64_t*>(labels.raw_data()), dlogits.raw_data(), n, c, label_smoothing, scale,
                                              s.stream));
}

int64_t CudaBackend::count_correct(const Tensor& logits, const Tensor& labels) {
  CudaOpScope s("count_correct", {&logits, &labels}, {});
  CudaScratch count(s.device, sizeof(unsigned long long));
  TD_CUDA(cuda_kernels::count_correct(elem(logits), logits.raw_data(),
                                      static_cast<const int64_t*>(labels.raw_data()),
                                      static_cast<unsigned long long*>(count.get()), logits.size(0), logits.size(1),
                                      s.stream));
  return static_cast<int64_t>(read_back<unsigned long long>(s, count.get()));
}

void CudaBackend::softmax_cross_entropy_accumulate(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                                   const Tensor& probs, const Tensor& metrics) {
  CudaOpScope s("softmax_cross_entropy_accumulate", {&logits, &labels}, {&probs, &metrics});
  const int64_t n = logits.size(0), c = logits.size(1);
  CudaScratch rows(s.device, static_cast<size_t>(n) * sizeof(double));  // stream-ordered reuse
  TD_CUDA(cuda_kernels::softmax_xent_accumulate(
      elem(logits), logits.raw_data(), static_cast<const int64_t*>(labels.raw_data()),
      static_cast<float*>(probs.raw_data()), static_cast<double*>(rows.get()), static_cast<float*>(metrics.raw_data()),
      n, c, label_smoothing, s.stream));
}

}  // namespace tandem::ops
