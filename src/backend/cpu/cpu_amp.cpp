// The mixed-precision ops on the cpu (tandem/amp_ops.h): loss-scale multiply, the fused
// inf/NaN check and unscale, the scale update, global-norm clipping and the gated host task.
// Reductions run over OpenMP threads in static tiles and are combined in thread order, so the
// results do not depend on timing.
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_loops.h"

namespace tandem::ops {
namespace {

// Whether any of the n floats is inf or NaN (exponent bits all set), and x *= a.
bool check_and_scale(float* x, int64_t n, float a) {
  int bad = 0;
#pragma omp parallel for simd reduction(| : bad) if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    bad |= !std::isfinite(x[i]);
    x[i] *= a;
  }
  return bad != 0;
}

// Sum of squares of n floats, in double.
double sum_squares(const float* x, int64_t n) {
  double s = 0.0;
#pragma omp parallel for simd reduction(+ : s) if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

}  // namespace

void CpuBackend::amp_scale(const Tensor& src, const Tensor& state, const Tensor& dst) {
  const float s = state.data<float>()[kScale];
  const float* a = src.data<float>();
  const int64_t n = src.numel();
  switch (dst.dtype()) {
    case DType::f32: {
      float* d = dst.data<float>();
      for (int64_t i = 0; i < n; ++i) d[i] = a[i] * s;
      break;
    }
    case DType::bf16: {
      auto* d = static_cast<uint16_t*>(dst.raw_data());
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(a[i] * s);
      break;
    }
    default: {
      auto* d = static_cast<uint16_t*>(dst.raw_data());
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_f16(a[i] * s);
      break;
    }
  }
}

void CpuBackend::amp_unscale_check_(const std::vector<Tensor>& grads, const Tensor& state) {
  float* st = state.data<float>();
  // GradScaler: inv_scale = scale.double().reciprocal().float().
  const float inv = static_cast<float>(1.0 / static_cast<double>(st[kScale]));
  bool found = false;
  for (const Tensor& g : grads)
    if (g.defined()) found |= check_and_scale(g.data<float>(), g.numel(), inv);
  st[kFoundInf] = found ? 1.0f : 0.0f;
}

void CpuBackend::amp_update_scale_(const Tensor& state, const AmpScaleParams& p) {
  float* st = state.data<float>();
  if (st[kFoundInf] != 0.0f) {
    st[kScale] = std::max(st[kScale] * p.backoff_factor, p.min_scale);
    st[kGrowthTracker] = 0.0f;
    st[kSkippedSteps] += 1.0f;
    return;
  }
  const float good = st[kGrowthTracker] + 1.0f;
  if (good >= static_cast<float>(p.growth_interval)) {
    const float grown = st[kScale] * p.growth_factor;
    if (std::isfinite(grown)) st[kScale] = grown;
    st[kGrowthTracker] = 0.0f;
  } else {
    st[kGrowthTracker] = good;
  }
}

void CpuBackend::clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm, const Tensor& total_norm) {
  double sq = 0.0;
  for (const Tensor& g : grads)
    if (g.defined()) sq += sum_squares(g.data<float>(), g.numel());
  const double norm = std::sqrt(sq);
  total_norm.data<float>()[0] = static_cast<float>(norm);
  // torch.nn.utils.clip_grad_norm_: clip_coef = max_norm / (total_norm + 1e-6), clamped at 1.
  const float coef = static_cast<float>(max_norm) / (static_cast<float>(norm) + 1e-6f);
  if (!(coef < 1.0f)) return;  // within the bound; a NaN norm leaves the grads as they are
  for (const Tensor& g : grads)
    if (g.defined()) check_and_scale(g.data<float>(), g.numel(), coef);
}

void CpuBackend::run_if_finite(const Tensor& state, const std::vector<Tensor>&, std::function<void()> fn) {
  if (state.defined() && state.data<float>()[kFoundInf] != 0.0f) return;
  fn();
}

}  // namespace tandem::ops
