// One-element Adam and SGD updates on the cpu kernels' arguments: the scalar kernel, and the
// tails of the SIMD kernels. The arithmetic is src/backend/optim_element.h's (shared with the
// CUDA kernels); the SIMD kernels perform exactly these operations lane by lane (same fused
// multiply-adds, same order), so every level gives bit-identical results. Functions are
// `static` so that each kernel file gets its own copy compiled for its own instruction set.
// Private to src/backend/cpu.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/cpu_optim_args.h"
#include "backend/optim_element.h"
#include "tandem/dtype.h"

namespace tandem::ops::detail {

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
  float m = a.exp_avg[i], v = a.exp_avg_sq[i];
  const float np = adam_element_update(a.c, a.param[i], a.grad[i], m, v);
  a.exp_avg[i] = m;
  a.exp_avg_sq[i] = v;
  a.param[i] = np;
  if (a.out) store_out(a.out, a.out_dtype, i, np);
}

// The same update with bf16 moments (AdamArgs::exp_avg16): widened exactly, stored with
// stochastic rounding.
static inline void adam_element_bf16m(const AdamArgs& a, int64_t i) {
  float m = bf16_to_float(a.exp_avg16[i]), v = bf16_to_float(a.exp_avg_sq16[i]);
  const float np = adam_element_update(a.c, a.param[i], a.grad[i], m, v);
  uint32_t mb, vb;
  std::memcpy(&mb, &m, 4);
  std::memcpy(&vb, &v, 4);
  const auto idx = static_cast<uint32_t>(i);
  a.exp_avg16[i] = stochastic_bf16(mb, stochastic_noise(a.seed, 2 * idx));
  a.exp_avg_sq16[i] = stochastic_bf16(vb, stochastic_noise(a.seed, 2 * idx + 1));
  a.param[i] = np;
  if (a.out) store_out(a.out, a.out_dtype, i, np);
}

static inline void sgd_element(const SgdArgs& a, int64_t i) {
  const float np = sgd_element_update(a.c, a.param[i], a.grad[i], a.buf ? a.buf + i : nullptr);
  a.param[i] = np;
  if (a.out) store_out(a.out, a.out_dtype, i, np);
}

}  // namespace tandem::ops::detail
