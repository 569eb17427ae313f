// Own kernels: label checks, softmax cross-entropy (forward, backward, metrics) and
// accuracy, templated on the element type of the logits and dlogits (softmax, probabilities and
// the loss in f32/double for every type). Launchers return the launch status.
#include <cfloat>

#include "backend/cuda/cuda_elem.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"

namespace tandem::cuda_kernels {
namespace {

__global__ void check_labels_k(const int64_t* labels, int64_t n, int64_t c, unsigned long long* bad) {
  for (int64_t i = global_index(); i < n; i += global_stride())
    if (labels[i] < 0 || labels[i] >= c) atomicMin(bad, static_cast<unsigned long long>(i));
}

// One warp per row: max, sum of exp (double), probabilities and the row's smoothed loss.
template <typename T>
__global__ void xent_fwd_k(const T* z, const int64_t* labels, float* probs, double* row_loss, int64_t n,
                           int64_t c, double e) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t i = global_index() >> 5; i < n; i += warps) {
    const T* zi = z + i * c;
    float* pi = probs + i * c;
    float mx = -INFINITY;
    for (int64_t j = lane; j < c; j += 32) mx = load(zi, j) > mx ? load(zi, j) : mx;
    for (int o = 16; o > 0; o >>= 1) {
      const float t = __shfl_xor_sync(0xffffffffu, mx, o);
      mx = t > mx ? t : mx;
    }
    double sum = 0.0, sum_z = 0.0;
    for (int64_t j = lane; j < c; j += 32) {
      const float zj = load(zi, j);
      const float ex = expf(zj - mx);
      pi[j] = ex;
      sum += ex;
      sum_z += zj - mx;
    }
    for (int o = 16; o > 0; o >>= 1) {
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
      sum_z += __shfl_xor_sync(0xffffffffu, sum_z, o);
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = lane; j < c; j += 32) pi[j] *= inv;
    if (lane == 0) {
      const int64_t lab = labels[i];
      const double lse = log(sum);
      const double nll = lab >= 0 && lab < c ? lse - (load(zi, lab) - mx) : 0.0;
      row_loss[i] = (1.0 - e) * nll + e * (lse - sum_z / static_cast<double>(c));
    }
  }
}

// One block: the mean of row_loss, in a fixed order (deterministic).
__global__ void mean_k(const double* v, double* out, int64_t n) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += v[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) *out = n > 0 ? s / static_cast<double>(n) : 0.0;
}

template <typename T>
__global__ void xent_bwd_k(const float* probs, const int64_t* labels, T* d, int64_t n, int64_t c, float off,
                           float on, float scale) {
  const int64_t total = n * c;
  for (int64_t k = global_index(); k < total; k += global_stride()) {
    const int64_t i = k / c, j = k - i * c;
    float v = (probs[k] - off) * scale;
    if (labels[i] == j) v -= on * scale;
    store(d, k, v);
  }
}

// One warp per row: argmax (first maximum) compared with the label.
template <typename T>
__global__ void count_correct_k(const T* z, const int64_t* labels, unsigned long long* count, int64_t n,
                                int64_t c) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t i = global_index() >> 5; i < n; i += warps) {
    const T* zi = z + i * c;
    float best = -INFINITY;
    int64_t bi = c;  // none yet
    for (int64_t j = lane; j < c; j += 32)
      if (bi == c || load(zi, j) > best) best = load(zi, j), bi = j;
    for (int o = 16; o > 0; o >>= 1) {
      const float tb = __shfl_xor_sync(0xffffffffu, best, o);
      const int64_t ti = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ti < c && (bi == c || tb > best || (tb == best && ti < bi))) best = tb, bi = ti;
    }
    if (lane == 0 && bi == labels[i]) atomicAdd(count, 1ull);
  }
}

// One block: adds the batch's loss sum, correct rows, row count and rows with an invalid
// label to metrics [4], summing in a fixed order (deterministic).
template <typename T>
__global__ void xent_metrics_k(const double* row_loss, const T* z, const int64_t* labels, float* metrics,
                               int64_t n, int64_t c) {
  __shared__ double scratch[32];
  double loss = 0.0, correct = 0.0, bad = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    loss += row_loss[i];
    const int64_t lab = labels[i];
    if (lab < 0 || lab >= c) {
      bad += 1.0;
      continue;
    }
    const T* zi = z + i * c;
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (load(zi, j) > load(zi, best)) best = j;
    if (best == lab) correct += 1.0;
  }
  loss = block_sum(loss, scratch);
  correct = block_sum(correct, scratch);
  bad = block_sum(bad, scratch);
  if (threadIdx.x == 0) {
    metrics[0] += static_cast<float>(loss);
    metrics[1] += static_cast<float>(correct);
    metrics[2] += static_cast<float>(n);
    metrics[3] += static_cast<float>(bad);
  }
}
}  // namespace

cudaError_t check_labels(const int64_t* labels, int64_t n, int64_t c, unsigned long long* bad_row,
                         cudaStream_t s) {
  const cudaError_t err = cudaMemsetAsync(bad_row, 0xff, sizeof(unsigned long long), s);
  if (err != cudaSuccess) return err;
  if (n > 0) check_labels_k<<<blocks_for(n), kThreads, 0, s>>>(labels, n, c, bad_row);
  return cudaGetLastError();
}

cudaError_t softmax_xent_forward(Elem e, const void* logits, const int64_t* labels, float* probs, double* row_loss,
                                 double* loss, int64_t n, int64_t c, double smoothing, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0)
      xent_fwd_k<<<blocks_for(n * 32), kThreads, 0, s>>>(static_cast<const T*>(logits), labels, probs, row_loss, n,
                                                         c, smoothing);
    mean_k<<<1, kThreads, 0, s>>>(row_loss, loss, n);
    return cudaGetLastError();
  });
}

cudaError_t softmax_xent_accumulate(Elem e, const void* logits, const int64_t* labels, float* probs,
                                    double* row_loss, float* metrics, int64_t n, int64_t c, double smoothing,
                                    cudaStream_t s) {
  if (n <= 0) return cudaGetLastError();
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    const T* z = static_cast<const T*>(logits);
    xent_fwd_k<<<blocks_for(n * 32), kThreads, 0, s>>>(z, labels, probs, row_loss, n, c, smoothing);
    xent_metrics_k<<<1, kThreads, 0, s>>>(row_loss, z, labels, metrics, n, c);
    return cudaGetLastError();
  });
}

cudaError_t softmax_xent_backward(Elem e, const float* probs, const int64_t* labels, void* dlogits, int64_t n,
                                  int64_t c, float smoothing, float scale, cudaStream_t s) {
  const float off = smoothing / static_cast<float>(c), on = 1.0f - smoothing;
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n * c > 0)
      xent_bwd_k<<<blocks_for(n * c), kThreads, 0, s>>>(probs, labels, static_cast<T*>(dlogits), n, c, off, on,
                                                        scale);
    return cudaGetLastError();
  });
}

cudaError_t count_correct(Elem e, const void* logits, const int64_t* labels, unsigned long long* count, int64_t n,
                          int64_t c, cudaStream_t s) {
  const cudaError_t err = cudaMemsetAsync(count, 0, sizeof(unsigned long long), s);
  if (err != cudaSuccess) return err;
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0)
      count_correct_k<<<blocks_for(n * 32), kThreads, 0, s>>>(static_cast<const T*>(logits), labels, count, n, c);
    return cudaGetLastError();
  });
}

}  // namespace tandem::cuda_kernels
