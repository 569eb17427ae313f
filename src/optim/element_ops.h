// One-element Adam and SGD updates: the scalar kernel, and the tails of the SIMD kernels.
// The SIMD kernels perform exactly these operations lane by lane (same fused multiply-adds,
// same order), so every level gives bit-identical results. Functions are `static` so that
// each kernel file gets its own copy compiled for its own instruction set (no ODR sharing
// between files built for different targets). Private to src/optim.
#pragma once

#include <cmath>
#include <cstdint>

#include "optim/kernel_args.h"
#include "tandem/dtype.h"

namespace tandem::optim::detail {

static inline void store_out(void* out, DType dtype, int64_t i, float x) {
  if (dtype == DType::f32) {
    static_cast<float*>(out)[i] = x;
  } else if (dtype == DType::bf16) {
    static_cast<uint16_t*>(out)[i] = float_to_bf16(x);
  } else {
    static_cast<uint16_t*>(out)[i] = float_to_f16(x);
  }
}

static inline void adam_element(const AdamArgs& a, int64_t i) {
  const float p = a.param[i];
  const float g = std::fma(a.c.l2, p, a.grad[i]);
  const float m = std::fma(a.c.beta1, a.exp_avg[i], a.c.one_minus_beta1 * g);
  const float v = std::fma(a.c.beta2, a.exp_avg_sq[i], (a.c.one_minus_beta2 * g) * g);
  const float denom = std::sqrt(v) / a.c.sqrt_bc2 + a.c.eps;
  const float update = std::fma(m / denom, a.c.step_size, a.c.lr_wd * p);
  const float np = p - update;
  a.exp_avg[i] = m;
  a.exp_avg_sq[i] = v;
  a.param[i] = np;
  if (a.out) store_out(a.out, a.out_dtype, i, np);
}

static inline void sgd_element(const SgdArgs& a, int64_t i) {
  const float p = a.param[i];
  float d = std::fma(a.c.weight_decay, p, a.grad[i]);
  if (a.buf) {
    const float b = a.c.init_buffer ? d : std::fma(a.c.momentum, a.buf[i], d);
    a.buf[i] = b;
    d = a.c.nesterov ? std::fma(a.c.momentum, b, d) : b;
  }
  const float np = std::fma(-a.c.lr, d, p);
  a.param[i] = np;
  if (a.out) store_out(a.out, a.out_dtype, i, np);
}

}  // namespace tandem::optim::detail
