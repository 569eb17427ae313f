// Own kernels: the loss scaler's device steps (loss-gradient scaling, the fused inf/NaN check
// and unscale, the scale update) and global-norm clipping, with the arithmetic of the cpu
// backend (src/backend/cpu/cpu_amp.cpp). Reductions are deterministic: fixed partials per
// gradient summed in a fixed order. Launchers return the launch status.
#include <cmath>

#include "backend/cuda/cuda_elem.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"

namespace tandem::cuda_kernels {
namespace {

// The state's indices (tandem/amp_ops.h's AmpState; cuda_amp.cpp checks they agree).
namespace ops {
constexpr int kScale = kAmpScale, kGrowthTracker = kAmpGrowthTracker, kFoundInf = kAmpFoundInf,
              kSkippedSteps = kAmpSkippedSteps;
}  // namespace ops

template <typename T>
__global__ void amp_scale_k(const float* src, const float* state, T* dst, int64_t n) {
  const float sc = state[ops::kScale];
  for (int64_t i = global_index(); i < n; i += global_stride()) store(dst, i, src[i] * sc);
}

__global__ void clear_found_k(float* state) { state[ops::kFoundInf] = 0.0f; }

// GradScaler: inv_scale = scale.double().reciprocal().float(). Every thread that meets an
// inf or NaN stores the same 1 (a benign race).
__global__ void unscale_check_k(float* g, float* state, int64_t n) {
  const float inv = static_cast<float>(1.0 / static_cast<double>(state[ops::kScale]));
  bool bad = false;
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    bad |= !isfinite(g[i]);
    g[i] *= inv;
  }
  if (bad) state[ops::kFoundInf] = 1.0f;
}

__global__ void update_scale_k(float* st, float growth, float backoff, int64_t interval, float min_scale) {
  if (st[ops::kFoundInf] != 0.0f) {
    st[ops::kScale] = fmaxf(st[ops::kScale] * backoff, min_scale);
    st[ops::kGrowthTracker] = 0.0f;
    st[ops::kSkippedSteps] += 1.0f;
    return;
  }
  const float good = st[ops::kGrowthTracker] + 1.0f;
  if (good >= static_cast<float>(interval)) {
    const float grown = st[ops::kScale] * growth;
    if (isfinite(grown)) st[ops::kScale] = grown;
    st[ops::kGrowthTracker] = 0.0f;
  } else {
    st[ops::kGrowthTracker] = good;
  }
}

// kNormBlocks blocks; block b sums elements b * blockDim.x + t, stepping by the grid.
__global__ void sum_squares_k(const float* g, int64_t n, double* partials) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = global_index(); i < n; i += global_stride()) s += static_cast<double>(g[i]) * g[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// torch.nn.utils.clip_grad_norm_: clip_coef = max_norm / (total_norm + 1e-6), clamped at 1.
__global__ void clip_coef_k(const double* partials, int64_t count, double max_norm, float* total_norm, float* coef) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) {
    const double norm = sqrt(s);
    total_norm[0] = static_cast<float>(norm);
    const float c = static_cast<float>(max_norm) / (static_cast<float>(norm) + 1e-6f);
    coef[0] = c < 1.0f ? c : 1.0f;  // a NaN norm gives 1: the grads stay as they are
  }
}

__global__ void scale_by_k(float* g, const float* coef, int64_t n) {
  const float c = coef[0];
  if (c == 1.0f) return;
  for (int64_t i = global_index(); i < n; i += global_stride()) g[i] *= c;
}

}  // namespace

cudaError_t amp_scale(Elem e, const float* src, const float* state, void* dst, int64_t n, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0) amp_scale_k<<<blocks_for(n), kThreads, 0, s>>>(src, state, static_cast<T*>(dst), n);
    return cudaGetLastError();
  });
}

cudaError_t amp_clear_found(float* state, cudaStream_t s) {
  clear_found_k<<<1, 1, 0, s>>>(state);
  return cudaGetLastError();
}

cudaError_t amp_unscale_check(float* g, float* state, int64_t n, cudaStream_t s) {
  if (n > 0) unscale_check_k<<<blocks_for(n), kThreads, 0, s>>>(g, state, n);
  return cudaGetLastError();
}

cudaError_t amp_update_scale(float* state, float growth_factor, float backoff_factor, int64_t growth_interval,
                             float min_scale, cudaStream_t s) {
  update_scale_k<<<1, 1, 0, s>>>(state, growth_factor, backoff_factor, growth_interval, min_scale);
  return cudaGetLastError();
}

cudaError_t sum_squares(const float* g, int64_t n, double* partials, cudaStream_t s) {
  sum_squares_k<<<kNormBlocks, kThreads, 0, s>>>(g, n, partials);
  return cudaGetLastError();
}

cudaError_t clip_coef(const double* partials, int64_t count, double max_norm, float* total_norm, float* coef,
                      cudaStream_t s) {
  clip_coef_k<<<1, kThreads, 0, s>>>(partials, count, max_norm, total_norm, coef);
  return cudaGetLastError();
}

cudaError_t scale_by(float* g, const float* coef, int64_t n, cudaStream_t s) {
  if (n > 0) scale_by_k<<<blocks_for(n), kThreads, 0, s>>>(g, coef, n);
  return cudaGetLastError();
}

}  // namespace tandem::cuda_kernels
