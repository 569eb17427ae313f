// Own kernels: element-wise ops, dropout (Philox, same mask as the CPU backend), row bias and
// column sums for linear layers, max pooling with indices, softmax cross-entropy and
// accuracy. Launchers return the launch status.
#include <cfloat>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"

namespace tandem::cuda_kernels {
namespace {

__global__ void relu_fwd_k(const float* x, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] = x[i] <= 0.0f ? 0.0f : x[i];  // NaN propagates
}

__global__ void relu_bwd_k(const float* dy, const float* y, float* dx, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) dx[i] = y[i] <= 0.0f ? 0.0f : dy[i];
}

// Philox4x32-10 (Salmon et al. 2011), the same rounds as tandem::Philox::block.
__device__ uint4 philox_block(uint4 c, uint2 k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    const uint32_t hi0 = __umulhi(kM0, c.x), lo0 = kM0 * c.x;
    const uint32_t hi1 = __umulhi(kM1, c.z), lo1 = kM1 * c.z;
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k.x += kW0;
    k.y += kW1;
  }
  return c;
}

// One thread per Philox block of 4 draws (elements 4j .. 4j+3).
__global__ void dropout_fwd_k(const float* x, float* y, uint8_t* mask, int64_t n, float p, float scale,
                              PhiloxKey key) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t j = global_index(); j < blocks; j += global_stride()) {
    const uint4 r = philox_block(make_uint4(static_cast<uint32_t>(j), key.ctr[0], key.ctr[1], key.ctr[2]),
                                 make_uint2(key.key[0], key.key[1]));
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int64_t i = 4 * j + q;
      if (i >= n) break;
      const float u = static_cast<float>(w[q] >> 8) * (1.0f / 16777216.0f);
      const bool keep = u >= p;
      mask[i] = keep ? 1 : 0;
      y[i] = keep ? x[i] * scale : 0.0f;
    }
  }
}

__global__ void dropout_bwd_k(const float* dy, const uint8_t* mask, float* dx, int64_t n, float scale) {
  for (int64_t i = global_index(); i < n; i += global_stride()) dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}

__global__ void axpy_k(float* d, const float* s, float alpha, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) d[i] += alpha * s[i];
}

__global__ void scale_k(float* d, float alpha, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) d[i] *= alpha;
}

__global__ void add_row_bias_k(float* y, const float* b, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] += b[i % cols];
}

// One thread per column; consecutive threads read consecutive columns of a row.
__global__ void sum_rows_k(const float* a, float* out, int64_t rows, int64_t cols, bool accumulate) {
  for (int64_t c = global_index(); c < cols; c += global_stride()) {
    double s = 0.0;
    for (int64_t r = 0; r < rows; ++r) s += a[r * cols + c];
    out[c] = accumulate ? out[c] + static_cast<float>(s) : static_cast<float>(s);
  }
}

// One thread per output; the first maximum in row-major window order wins, NaN propagates
// (as the CPU backend).
__global__ void max_pool_fwd_k(const float* x, float* y, int32_t* idx, PoolShape p) {
  const int64_t n = p.planes * p.P * p.Q;
  for (int64_t o = global_index(); o < n; o += global_stride()) {
    const int64_t ow = o % p.Q, oh = (o / p.Q) % p.P, pl = o / (p.P * p.Q);
    const int64_t h0 = max(oh * p.sh - p.ph, int64_t{0}), h1 = min(oh * p.sh - p.ph + p.kh, p.H);
    const int64_t w0 = max(ow * p.sw - p.pw, int64_t{0}), w1 = min(ow * p.sw - p.pw + p.kw, p.W);
    const float* xs = x + pl * p.H * p.W;
    float best = -INFINITY;
    int64_t bi = h0 * p.W + w0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) {
        const float v = xs[h * p.W + w];
        if (v > best || isnan(v)) best = v, bi = h * p.W + w;
      }
    y[o] = best;
    if (idx) idx[o] = static_cast<int32_t>(bi);
  }
}

__global__ void max_pool_bwd_k(const float* dy, const int32_t* idx, float* dx, int64_t planes, int64_t hw,
                               int64_t pq) {
  const int64_t n = planes * pq;
  for (int64_t o = global_index(); o < n; o += global_stride()) {
    const int32_t k = idx[o];
    if (k >= 0 && k < hw) atomicAdd(dx + (o / pq) * hw + k, dy[o]);
  }
}

__global__ void check_labels_k(const int64_t* labels, int64_t n, int64_t c, unsigned long long* bad) {
  for (int64_t i = global_index(); i < n; i += global_stride())
    if (labels[i] < 0 || labels[i] >= c) atomicMin(bad, static_cast<unsigned long long>(i));
}

// One warp per row: max, sum of exp (double), probabilities and the row's smoothed loss.
__global__ void xent_fwd_k(const float* z, const int64_t* labels, float* probs, double* row_loss, int64_t n,
                           int64_t c, double e) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t i = global_index() >> 5; i < n; i += warps) {
    const float* zi = z + i * c;
    float* pi = probs + i * c;
    float mx = -INFINITY;
    for (int64_t j = lane; j < c; j += 32) mx = zi[j] > mx ? zi[j] : mx;
    for (int o = 16; o > 0; o >>= 1) {
      const float t = __shfl_xor_sync(0xffffffffu, mx, o);
      mx = t > mx ? t : mx;
    }
    double sum = 0.0, sum_z = 0.0;
    for (int64_t j = lane; j < c; j += 32) {
      const float ex = expf(zi[j] - mx);
      pi[j] = ex;
      sum += ex;
      sum_z += zi[j] - mx;
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
      const double nll = lab >= 0 && lab < c ? lse - (zi[lab] - mx) : 0.0;
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

__global__ void xent_bwd_k(const float* probs, const int64_t* labels, float* d, int64_t n, int64_t c, float off,
                           float on, float scale) {
  const int64_t total = n * c;
  for (int64_t k = global_index(); k < total; k += global_stride()) {
    const int64_t i = k / c, j = k - i * c;
    float v = (probs[k] - off) * scale;
    if (labels[i] == j) v -= on * scale;
    d[k] = v;
  }
}

// One warp per row: argmax (first maximum) compared with the label.
__global__ void count_correct_k(const float* z, const int64_t* labels, unsigned long long* count, int64_t n,
                                int64_t c) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t i = global_index() >> 5; i < n; i += warps) {
    const float* zi = z + i * c;
    float best = -INFINITY;
    int64_t bi = c;  // none yet
    for (int64_t j = lane; j < c; j += 32)
      if (bi == c || zi[j] > best) best = zi[j], bi = j;
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
__global__ void xent_metrics_k(const double* row_loss, const float* z, const int64_t* labels, float* metrics,
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
    const float* zi = z + i * c;
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (zi[j] > zi[best]) best = j;
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

cudaError_t relu_forward(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) relu_fwd_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t relu_backward(const float* dy, const float* y, float* dx, int64_t n, cudaStream_t s) {
  if (n > 0) relu_bwd_k<<<blocks_for(n), kThreads, 0, s>>>(dy, y, dx, n);
  return cudaGetLastError();
}

cudaError_t dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, float p, PhiloxKey k,
                            cudaStream_t s) {
  const float scale = 1.0f / (1.0f - p);
  if (n > 0) dropout_fwd_k<<<blocks_for((n + 3) / 4), kThreads, 0, s>>>(x, y, mask, n, p, scale, k);
  return cudaGetLastError();
}

cudaError_t dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t n, float scale,
                             cudaStream_t s) {
  if (n > 0) dropout_bwd_k<<<blocks_for(n), kThreads, 0, s>>>(dy, mask, dx, n, scale);
  return cudaGetLastError();
}

cudaError_t axpy(float* dst, const float* src, float alpha, int64_t n, cudaStream_t s) {
  if (n > 0) axpy_k<<<blocks_for(n), kThreads, 0, s>>>(dst, src, alpha, n);
  return cudaGetLastError();
}

cudaError_t scale(float* dst, float alpha, int64_t n, cudaStream_t s) {
  if (n > 0) scale_k<<<blocks_for(n), kThreads, 0, s>>>(dst, alpha, n);
  return cudaGetLastError();
}

cudaError_t add_row_bias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows * cols > 0) add_row_bias_k<<<blocks_for(rows * cols), kThreads, 0, s>>>(y, b, rows, cols);
  return cudaGetLastError();
}

cudaError_t sum_rows(const float* a, float* out, int64_t rows, int64_t cols, bool accumulate, cudaStream_t s) {
  if (cols > 0) sum_rows_k<<<blocks_for(cols, 128), 128, 0, s>>>(a, out, rows, cols, accumulate);
  return cudaGetLastError();
}

cudaError_t max_pool_forward(const float* x, float* y, int32_t* indices, const PoolShape& p, cudaStream_t s) {
  const int64_t n = p.planes * p.P * p.Q;
  if (n > 0) max_pool_fwd_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, indices, p);
  return cudaGetLastError();
}

cudaError_t max_pool_backward(const float* dy, const int32_t* indices, float* dx, const PoolShape& p,
                              cudaStream_t s) {
  const int64_t hw = p.H * p.W, pq = p.P * p.Q;
  if (p.planes * hw > 0) {
    const cudaError_t err = cudaMemsetAsync(dx, 0, static_cast<size_t>(p.planes * hw) * sizeof(float), s);
    if (err != cudaSuccess) return err;
  }
  if (p.planes * pq > 0)
    max_pool_bwd_k<<<blocks_for(p.planes * pq), kThreads, 0, s>>>(dy, indices, dx, p.planes, hw, pq);
  return cudaGetLastError();
}

cudaError_t check_labels(const int64_t* labels, int64_t n, int64_t c, unsigned long long* bad_row,
                         cudaStream_t s) {
  const cudaError_t err = cudaMemsetAsync(bad_row, 0xff, sizeof(unsigned long long), s);
  if (err != cudaSuccess) return err;
  if (n > 0) check_labels_k<<<blocks_for(n), kThreads, 0, s>>>(labels, n, c, bad_row);
  return cudaGetLastError();
}

cudaError_t softmax_xent_forward(const float* logits, const int64_t* labels, float* probs, double* row_loss,
                                 double* loss, int64_t n, int64_t c, double smoothing, cudaStream_t s) {
  if (n > 0) xent_fwd_k<<<blocks_for(n * 32), kThreads, 0, s>>>(logits, labels, probs, row_loss, n, c, smoothing);
  mean_k<<<1, kThreads, 0, s>>>(row_loss, loss, n);
  return cudaGetLastError();
}

cudaError_t softmax_xent_accumulate(const float* logits, const int64_t* labels, float* probs, double* row_loss,
                                    float* metrics, int64_t n, int64_t c, double smoothing, cudaStream_t s) {
  if (n <= 0) return cudaGetLastError();
  xent_fwd_k<<<blocks_for(n * 32), kThreads, 0, s>>>(logits, labels, probs, row_loss, n, c, smoothing);
  xent_metrics_k<<<1, kThreads, 0, s>>>(row_loss, logits, labels, metrics, n, c);
  return cudaGetLastError();
}

cudaError_t softmax_xent_backward(const float* probs, const int64_t* labels, float* dlogits, int64_t n,
                                  int64_t c, float smoothing, float scale, cudaStream_t s) {
  const float off = smoothing / static_cast<float>(c), on = 1.0f - smoothing;
  if (n * c > 0) xent_bwd_k<<<blocks_for(n * c), kThreads, 0, s>>>(probs, labels, dlogits, n, c, off, on, scale);
  return cudaGetLastError();
}

cudaError_t count_correct(const float* logits, const int64_t* labels, unsigned long long* count, int64_t n,
                          int64_t c, cudaStream_t s) {
  const cudaError_t err = cudaMemsetAsync(count, 0, sizeof(unsigned long long), s);
  if (err != cudaSuccess) return err;
  if (n > 0) count_correct_k<<<blocks_for(n * 32), kThreads, 0, s>>>(logits, labels, count, n, c);
  return cudaGetLastError();
}

}  // namespace tandem::cuda_kernels
