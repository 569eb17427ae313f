// What the NCHW and NHWC batch-norm kernels (cpu_batch_norm_impl.h,
// cpu_batch_norm_nhwc_impl.h) share: their tensors' pointers and the per-channel step from the
// sums to the statistics and coefficients. Internal linkage, built into both target units.
#pragma once

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_loops.h"
#include "tandem/tensor.h"

namespace tandem::ops {
namespace {

// The tensors of a training forward (running_mean/running_var null when not given).
template <typename T>
struct BnForward {
  const T* x;
  T* y;
  const float *gamma, *beta;
  float *save_mean, *save_var, *running_mean, *running_var;
  BnForward(const Tensor& tx, const Tensor& ty, const Tensor& g, const Tensor& b, const Tensor& sm, const Tensor& sv,
            const Tensor& rm, const Tensor& rv)
      : x(cpu::elems<T>(tx)), y(cpu::elems<T>(ty)), gamma(g.data<float>()), beta(b.data<float>()),
        save_mean(sm.data<float>()), save_var(sv.data<float>()),
        running_mean(rm.defined() ? rm.data<float>() : nullptr),
        running_var(rv.defined() ? rv.data<float>() : nullptr) {}

  // Channel c's statistics from sum and sq, the sums of (x - k) and (x - k)^2 over count
  // values: writes save_mean, save_var (biased) and the running statistics; returns the
  // mean and the scale invstd * gamma as float.
  void finish(int64_t c, double k, double sum, double sq, double count, double eps, double momentum, float& mean_out,
              float& scale_out) const {
    const double mshift = count > 0 ? sum / count : 0.0;
    const double mean = k + mshift;
    const double var = count > 0 ? std::max(sq / count - mshift * mshift, 0.0) : 0.0;
    const double invstd = 1.0 / std::sqrt(var + eps);
    mean_out = static_cast<float>(mean);
    scale_out = static_cast<float>(invstd * gamma[c]);
    save_mean[c] = mean_out;
    save_var[c] = static_cast<float>(var);
    if (running_mean) {
      // PyTorch: running_var uses the unbiased variance (divisor count - 1).
      const double m = momentum;
      running_mean[c] = static_cast<float>((1.0 - m) * running_mean[c] + m * mean);
      running_var[c] = static_cast<float>((1.0 - m) * running_var[c] + m * var * count / (count - 1.0));
    }
  }
};

// The tensors of a backward (y null without the fused ReLU).
template <typename T>
struct BnBackward {
  const T *x, *dy, *y;
  T* dx;
  const float *gamma, *save_mean, *save_var;
  float *dgamma, *dbeta;
  BnBackward(const Tensor& tdy, const Tensor& tx, const Tensor& g, const Tensor& sm, const Tensor& sv,
             const Tensor& tdx, const Tensor& dg, const Tensor& db, bool fuse_relu, const Tensor& ty)
      : x(cpu::elems<T>(tx)), dy(cpu::elems<T>(tdy)), y(fuse_relu ? cpu::elems<T>(ty) : nullptr),
        dx(cpu::elems<T>(tdx)), gamma(g.data<float>()), save_mean(sm.data<float>()), save_var(sv.data<float>()),
        dgamma(dg.data<float>()), dbeta(db.data<float>()) {}

  double invstd(int64_t c, double eps) const { return 1.0 / std::sqrt(static_cast<double>(save_var[c]) + eps); }

  // Channel c from sum(dy) and sum(dy * (x - mean)) over count values: writes (or adds to)
  // dgamma and dbeta and returns the coefficients of
  //   dx = gamma * invstd * (dy - mean(dy) - (x - mean) * invstd^2 * mean(dy * (x - mean)))
  // as dx = a * (dy - mdy - (x - mean) * k).
  void finish(int64_t c, double sum_dy, double sum_dy_xmu, double count, double eps, bool accumulate, float& a,
              float& mdy, float& k) const {
    const double is = invstd(c, eps);
    a = static_cast<float>(gamma[c] * is);
    mdy = static_cast<float>(sum_dy / count);
    k = static_cast<float>(is * is * sum_dy_xmu / count);
    const float dgamma_c = static_cast<float>(sum_dy_xmu * is);
    const float dbeta_c = static_cast<float>(sum_dy);
    dgamma[c] = accumulate ? dgamma[c] + dgamma_c : dgamma_c;
    dbeta[c] = accumulate ? dbeta[c] + dbeta_c : dbeta_c;
  }
};

}  // namespace
}  // namespace tandem::ops
