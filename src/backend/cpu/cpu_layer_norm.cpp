// Layer norm on the cpu: rows in parallel, vectorised across channels (the loops in
// cpu_layer_norm_impl.h, built for AVX2 and AVX-512; cpu_transformer_kernels.h).
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_transformer_kernels.h"

namespace tandem::ops::cpu {
namespace {

float* f32_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

}  // namespace

}  // namespace tandem::ops::cpu

// The cpu backend's ops (tandem/transformer_ops.h; arguments checked by the front end).
namespace tandem::ops {

void CpuBackend::layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                    const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  cpu::LayerNormArgs a;
  a.dt = x.dtype();
  a.cols = x.size(-1);
  a.rows = a.cols > 0 ? x.numel() / a.cols : 0;
  a.eps = eps;
  a.x = x.raw_data();
  a.gamma = gamma.data<float>();
  a.beta = cpu::f32_or_null(beta);
  a.y = y.raw_data();
  a.mean = mean.data<float>();
  a.rstd = rstd.data<float>();
  if (a.rows == 0) return;
  cpu::transformer_kernels().layer_norm_forward(a);
}

void CpuBackend::layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                                     bool accumulate) {
  cpu::LayerNormArgs a;
  a.dt = x.dtype();
  a.cols = x.size(-1);
  a.rows = a.cols > 0 ? x.numel() / a.cols : 0;
  a.x = x.raw_data();
  a.gamma = gamma.data<float>();
  a.mean = mean.data<float>();
  a.rstd = rstd.data<float>();
  a.dy = dy.raw_data();
  a.dx = dx.defined() ? dx.raw_data() : nullptr;
  a.dgamma = cpu::f32_or_null(dgamma);
  a.dbeta = cpu::f32_or_null(dbeta);
  a.accumulate = accumulate;
  if (a.rows == 0) {  // no rows: zero parameter gradients (or leave them)
    for (float* p : {a.dgamma, a.dbeta})
      if (p && !accumulate)
        for (int64_t j = 0; j < a.cols; ++j) p[j] = 0.0f;
    return;
  }
  cpu::transformer_kernels().layer_norm_backward(a);
}

}  // namespace tandem::ops
