// Own kernels of the fused classifier + cross-entropy (the products are cuBLAS's, in
// cuda_classifier_loss.cpp): target counts, the softmax rows of one block of logits in place
// (one thread block per row; formulas as src/backend/cpu/cpu_classifier_loss_impl.h) and the
// metrics, every sum in a fixed order.
#include "backend/cuda/cuda_elem.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_reduce.cuh"
#include "backend/cuda/cuda_transformer_kernels.h"

namespace tandem::cuda_kernels {
namespace {

__global__ void count_k(const void* targets, bool i64, int64_t n, int64_t vocab, int64_t ignore, int64_t* counted) {
  __shared__ double scratch[32];
  double ok = 0.0, bad = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t t = load_id(targets, i64, i);
    if (t >= 0 && t < vocab)
      ok += 1.0;
    else if (t != ignore)
      bad += 1.0;
  }
  ok = block_sum(ok, scratch);
  bad = block_sum(bad, scratch);
  if (threadIdx.x == 0) {
    counted[0] = static_cast<int64_t>(ok);
    counted[1] = static_cast<int64_t>(bad);
  }
}

template <typename T>
__global__ void rows_k(float* logits, const void* targets, bool i64, int64_t rows, int64_t vocab,
                       const int64_t* counted, float grad_loss, const float* grad_scale, bool grad, T* grad_e,
                       float e_scale,
                       double* row_loss, uint8_t* row_correct) {
  __shared__ float fscratch[32];
  __shared__ int64_t iscratch[32];
  __shared__ double dscratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* z = logits + r * vocab;
    const int64_t t = load_id(targets, i64, r);
    const bool valid = t >= 0 && t < vocab;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) mx = fmaxf(mx, z[j]);
    mx = block_all(mx, -INFINITY, fscratch, MaxOp{});
    int64_t first = vocab;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
      if (z[j] == mx && j < first) first = j;
    first = block_all(first, INT64_MAX, iscratch, MinOp{});
    const float zt = valid ? z[t] : 0.0f;
    __syncthreads();  // every thread has read z[t] before it is overwritten
    float part = 0.0f;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float e = expf(z[j] - mx);
      z[j] = e;
      part += e;
    }
    const double sum = block_sum(part, dscratch);
    if (threadIdx.x == 0) {
      row_loss[r] = valid ? static_cast<double>(mx) + log(sum) - static_cast<double>(zt) : 0.0;
      row_correct[r] = valid && first == t ? 1 : 0;
    }
    if (!grad) continue;
    const float gl = grad_scale ? grad_loss * grad_scale[0] : grad_loss;
    const float scale = counted[0] > 0 ? gl / static_cast<float>(counted[0]) : 0.0f;
    const float k = valid ? static_cast<float>(scale / sum) : 0.0f;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float g = valid ? z[j] * k - (j == t ? scale : 0.0f) : 0.0f;
      z[j] = g;
      if (grad_e) store(grad_e + r * vocab, j, g * e_scale);
    }
    __syncthreads();  // the row is done before the next one reuses the scratch
  }
}

__global__ void metrics_k(const double* row_loss, const uint8_t* row_correct, int64_t n, const int64_t* counted,
                          float* metrics) {
  __shared__ double scratch[32];
  double loss = 0.0, correct = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    loss += row_loss[i];
    correct += row_correct[i];
  }
  loss = block_sum(loss, scratch);
  correct = block_sum(correct, scratch);
  if (threadIdx.x == 0) {
    metrics[0] += static_cast<float>(loss);
    metrics[1] += static_cast<float>(correct);
    metrics[2] += static_cast<float>(counted[0]);
    metrics[3] += static_cast<float>(counted[1]);
  }
}

}  // namespace

cudaError_t classifier_count(const void* targets, bool targets_i64, int64_t n, int64_t vocab, int64_t ignore_index,
                             int64_t* counted, cudaStream_t s) {
  count_k<<<1, 1024, 0, s>>>(targets, targets_i64, n, vocab, ignore_index, counted);
  return cudaGetLastError();
}

cudaError_t classifier_rows(float* logits, const void* targets, bool targets_i64, int64_t rows, int64_t vocab,
                            const int64_t* counted, float grad_loss, const float* grad_scale, bool grad, Elem e,
                            void* grad_e, float e_scale, double* row_loss, uint8_t* row_correct, cudaStream_t s) {
  if (rows <= 0) return cudaGetLastError();
  const unsigned grid = static_cast<unsigned>(rows < 65536 ? rows : 65536);
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    rows_k<<<grid, 512, 0, s>>>(logits, targets, targets_i64, rows, vocab, counted, grad_loss, grad_scale, grad,
                                static_cast<T*>(grad_e), e_scale, row_loss, row_correct);
    return cudaGetLastError();
  });
}

cudaError_t classifier_metrics(const double* row_loss, const uint8_t* row_correct, int64_t n, const int64_t* counted,
                               float* metrics, cudaStream_t s) {
  metrics_k<<<1, 1024, 0, s>>>(row_loss, row_correct, n, counted, metrics);
  return cudaGetLastError();
}

}  // namespace tandem::cuda_kernels
