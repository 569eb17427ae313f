// One-element Adam and SGD updates: the arithmetic every backend's optimizer kernel performs
// per element (the cpu scalar kernel and the tails of the SIMD kernels call these, the SIMD
// lanes repeat them operation for operation, the CUDA kernels call them on the device).
// Fused multiply-adds, IEEE sqrt and division, in this order, so every backend and every
// SIMD level gives the same bits. Formulas: torch.optim.Adam / AdamW / SGD docs, see
// tandem/optim_ops.h.
// The functions are `static` so that each file that includes this header gets its own copy
// compiled for its own instruction set (no ODR sharing between files built for different
// targets); TD_HOST_DEVICE makes them callable from CUDA kernels. Plain C++17, no tandem
// headers beyond tandem/optim_constants.h.
#pragma once

#include <math.h>

#include "tandem/optim_constants.h"

#if defined(__CUDACC__)
#define TD_HOST_DEVICE __host__ __device__
#else
#define TD_HOST_DEVICE
#endif

namespace tandem::ops::detail {

/// Adam/AdamW on one element: updates the moments m and v in place and returns the new
/// parameter. `p` is the parameter before the update, `grad` its gradient.
TD_HOST_DEVICE static inline float adam_element_update(const AdamConstants& c, float p, float grad,
                                                       float& m, float& v) {
  const float g = fmaf(c.l2, p, grad);
  m = fmaf(c.beta1, m, c.one_minus_beta1 * g);
  v = fmaf(c.beta2, v, (c.one_minus_beta2 * g) * g);
  const float denom = sqrtf(v) / c.sqrt_bc2 + c.eps;
  const float update = fmaf(m / denom, c.step_size, c.lr_wd * p);
  return p - update;
}

/// The noise of stochastic rounding for element `i` of a call whose seed is `seed`: a 32-bit
/// integer hash (the finaliser of MurmurHash3 on index and seed), whose low 16 bits are added
/// below the bf16 mantissa. The SIMD kernels compute it lane by lane with the same operations.
TD_HOST_DEVICE static inline unsigned stochastic_noise(unsigned seed, unsigned i) {
  unsigned h = i * 0x9E3779B1u ^ seed;
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h & 0xFFFFu;
}

/// f32 bits to bf16 bits, rounded stochastically: up with probability (the dropped 16 bits) /
/// 2^16, so that the rounding is unbiased (Gupta et al. 2015, "Deep Learning with Limited
/// Numerical Precision"); NaN stays a quiet NaN. `bits` is the float's bit pattern.
TD_HOST_DEVICE static inline unsigned short stochastic_bf16(unsigned bits, unsigned noise) {
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((bits >> 16) | 0x40u);
  return static_cast<unsigned short>((bits + noise) >> 16);
}

/// SGD on one element: updates the momentum buffer element `*buf` (null without momentum)
/// and returns the new parameter.
TD_HOST_DEVICE static inline float sgd_element_update(const SgdConstants& c, float p, float grad,
                                                      float* buf) {
  float d = fmaf(c.weight_decay, p, grad);
  if (buf) {
    const float b = c.init_buffer ? d : fmaf(c.momentum, *buf, d);
    *buf = b;
    d = c.nesterov ? fmaf(c.momentum, b, d) : b;
  }
  return fmaf(-c.lr, d, p);
}

}  // namespace tandem::ops::detail
