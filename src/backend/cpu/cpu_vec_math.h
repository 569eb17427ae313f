// Internal: exp and tanh written so that GCC vectorises them inside `#pragma omp simd`
// loops (no libm call, no branch): the softmax, attention and GELU kernels run on whole
// vectors. Included by the kernel units after their target pragma (cpu_transformer_*.cpp), so
// each instruction-set build gets its own copy (internal linkage).
//
// vexp is Cephes' expf (S. L. Moshier, Cephes Math Library): x = n ln2 + r with |r| <= ln2/2
// (ln2 split in two parts so n ln2 is exact), e^r by a degree-7 polynomial, 2^n from the
// exponent bits. Relative error below 2^-22 (about 2 ulp) on [-87, 88.3], checked against
// double exp by a test; x < -87 gives 0 (e^-87 is 1.6e-38, at f32's smallest normal),
// x > 88.3 gives e^88.3 (3.4e38, not inf), NaN gives NaN.
// vtanh(u) = 1 - 2 / (e^(2u) + 1): absolute error below 2^-22 (its relative error near 0 is
// larger, which GELU does not see: it adds 1 to it).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace tandem::ops::cpu {
namespace {

inline float vexp(float x) {
  float c = x > -87.0f ? x : -87.0f;
  c = c < 88.3f ? c : 88.3f;
  const float n = std::floor(c * 1.44269504088896341f + 0.5f);
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  const float v = x < -87.0f ? 0.0f : e * scale;
  return x != x ? x : v;  // NaN stays NaN
}

inline float vtanh(float u) { return 1.0f - 2.0f / (vexp(2.0f * u) + 1.0f); }

}  // namespace
}  // namespace tandem::ops::cpu
