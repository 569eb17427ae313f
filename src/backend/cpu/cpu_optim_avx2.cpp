// AVX2 + FMA + F16C kernels, 8 lanes, two vectors (one 64-byte line per array) per
// iteration. Compiled for that target through a pragma, so the rest of the build keeps the
// baseline instruction set; the dispatcher calls these only when the CPU has the features.
// Lane operations mirror src/backend/optim_element.h exactly.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

// Every header with external-linkage inline functions comes before the target pragma, so
// that none of them is emitted here with AVX2 code (the linker could keep that copy).
#include "backend/cpu/cpu_optim_args.h"
#include "tandem/dtype.h"

// clang ignores GCC's target pragma; its own attribute pragma gives every function below
// the same target.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "backend/cpu/cpu_optim_element.h"

namespace tandem::ops::detail {
namespace {

// float -> bf16, round to nearest even, NaN -> quiet NaN (as tandem::float_to_bf16).
inline __m128i bf16_from_ps(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i absu = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7f800000));
  const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  r = _mm256_blendv_epi8(r, qnan, nan);
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  return _mm256_castsi256_si128(packed);
}

inline void store_out8(void* out, DType dtype, int64_t i, __m256 x) {
  if (dtype == DType::f32) {
    _mm256_storeu_ps(static_cast<float*>(out) + i, x);
  } else if (dtype == DType::bf16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(out) + i), bf16_from_ps(x));
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(out) + i),
                     _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
}

struct AdamVec {
  __m256 beta1, omb1, beta2, omb2, sqrt_bc2, eps, step_size, l2, lr_wd;
  explicit AdamVec(const AdamArgs& a)
      : beta1(_mm256_set1_ps(a.c.beta1)), omb1(_mm256_set1_ps(a.c.one_minus_beta1)),
        beta2(_mm256_set1_ps(a.c.beta2)), omb2(_mm256_set1_ps(a.c.one_minus_beta2)),
        sqrt_bc2(_mm256_set1_ps(a.c.sqrt_bc2)), eps(_mm256_set1_ps(a.c.eps)),
        step_size(_mm256_set1_ps(a.c.step_size)), l2(_mm256_set1_ps(a.c.l2)),
        lr_wd(_mm256_set1_ps(a.c.lr_wd)) {}
};

inline void adam8(const AdamArgs& a, const AdamVec& c, int64_t i) {
  const __m256 p = _mm256_loadu_ps(a.param + i);
  const __m256 g = _mm256_fmadd_ps(c.l2, p, _mm256_loadu_ps(a.grad + i));
  const __m256 m = _mm256_fmadd_ps(c.beta1, _mm256_loadu_ps(a.exp_avg + i), _mm256_mul_ps(c.omb1, g));
  const __m256 v = _mm256_fmadd_ps(c.beta2, _mm256_loadu_ps(a.exp_avg_sq + i),
                                   _mm256_mul_ps(_mm256_mul_ps(c.omb2, g), g));
  const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), c.sqrt_bc2), c.eps);
  const __m256 update = _mm256_fmadd_ps(_mm256_div_ps(m, denom), c.step_size, _mm256_mul_ps(c.lr_wd, p));
  const __m256 np = _mm256_sub_ps(p, update);
  _mm256_storeu_ps(a.exp_avg + i, m);
  _mm256_storeu_ps(a.exp_avg_sq + i, v);
  _mm256_storeu_ps(a.param + i, np);
  if (a.out) store_out8(a.out, a.out_dtype, i, np);
}

// stochastic_noise of src/backend/optim_element.h, lane by lane.
inline __m256i noise8(uint32_t seed, __m256i idx) {
  __m256i h = _mm256_xor_si256(_mm256_mullo_epi32(idx, _mm256_set1_epi32(static_cast<int>(0x9E3779B1u))),
                               _mm256_set1_epi32(static_cast<int>(seed)));
  h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
  h = _mm256_mullo_epi32(h, _mm256_set1_epi32(static_cast<int>(0x85EBCA6Bu)));
  h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 13));
  h = _mm256_mullo_epi32(h, _mm256_set1_epi32(static_cast<int>(0xC2B2AE35u)));
  h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
  return _mm256_and_si256(h, _mm256_set1_epi32(0xFFFF));
}

// stochastic_bf16 lane by lane: 8 bf16 bit patterns.
inline __m128i stochastic_bf16_8(__m256 x, __m256i noise) {
  const __m256i u = _mm256_castps_si256(x);
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, noise), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40)), nan);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
}

inline __m256 widen_bf16_8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// adam8 with bf16 moments (adam_element_bf16m lane by lane).
inline void adam8_bf16m(const AdamArgs& a, const AdamVec& c, int64_t i) {
  const __m256 p = _mm256_loadu_ps(a.param + i);
  const __m256 g = _mm256_fmadd_ps(c.l2, p, _mm256_loadu_ps(a.grad + i));
  const __m256 m = _mm256_fmadd_ps(c.beta1, widen_bf16_8(a.exp_avg16 + i), _mm256_mul_ps(c.omb1, g));
  const __m256 v = _mm256_fmadd_ps(c.beta2, widen_bf16_8(a.exp_avg_sq16 + i), _mm256_mul_ps(_mm256_mul_ps(c.omb2, g), g));
  const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), c.sqrt_bc2), c.eps);
  const __m256 update = _mm256_fmadd_ps(_mm256_div_ps(m, denom), c.step_size, _mm256_mul_ps(c.lr_wd, p));
  const __m256 np = _mm256_sub_ps(p, update);
  const __m256i twice = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(i))), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), 1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(a.exp_avg16 + i), stochastic_bf16_8(m, noise8(a.seed, twice)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(a.exp_avg_sq16 + i),
                   stochastic_bf16_8(v, noise8(a.seed, _mm256_add_epi32(twice, _mm256_set1_epi32(1)))));
  _mm256_storeu_ps(a.param + i, np);
  if (a.out) store_out8(a.out, a.out_dtype, i, np);
}

inline void sgd8(const SgdArgs& a, __m256 lr_neg, __m256 mom, __m256 wd, int64_t i) {
  const __m256 p = _mm256_loadu_ps(a.param + i);
  __m256 d = _mm256_fmadd_ps(wd, p, _mm256_loadu_ps(a.grad + i));
  if (a.buf) {
    const __m256 b = a.c.init_buffer ? d : _mm256_fmadd_ps(mom, _mm256_loadu_ps(a.buf + i), d);
    _mm256_storeu_ps(a.buf + i, b);
    d = a.c.nesterov ? _mm256_fmadd_ps(mom, b, d) : b;
  }
  const __m256 np = _mm256_fmadd_ps(lr_neg, d, p);
  _mm256_storeu_ps(a.param + i, np);
  if (a.out) store_out8(a.out, a.out_dtype, i, np);
}

}  // namespace

void adam_range_avx2(const AdamArgs& a, int64_t begin, int64_t end) {
  const AdamVec c(a);
  int64_t i = begin;
  if (a.exp_avg16) {  // bf16 moments
    for (; i + 8 <= end; i += 8) adam8_bf16m(a, c, i);
    for (; i < end; ++i) adam_element_bf16m(a, i);
    return;
  }
  for (; i + 16 <= end; i += 16) {
    adam8(a, c, i);
    adam8(a, c, i + 8);
  }
  for (; i + 8 <= end; i += 8) adam8(a, c, i);
  for (; i < end; ++i) adam_element(a, i);
}

void sgd_range_avx2(const SgdArgs& a, int64_t begin, int64_t end) {
  const __m256 lr_neg = _mm256_set1_ps(-a.c.lr), mom = _mm256_set1_ps(a.c.momentum),
               wd = _mm256_set1_ps(a.c.weight_decay);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    sgd8(a, lr_neg, mom, wd, i);
    sgd8(a, lr_neg, mom, wd, i + 8);
  }
  for (; i + 8 <= end; i += 8) sgd8(a, lr_neg, mom, wd, i);
  for (; i < end; ++i) sgd_element(a, i);
}

// bf16: the bits shifted into the upper half; f16: F16C's exact conversion.
void widen_range_avx2(const WidenArgs& a, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.src + i));
    const __m256 x = a.src_dtype == DType::bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
                                                : _mm256_cvtph_ps(h);
    _mm256_storeu_ps(a.dst + i, x);
  }
  widen_range_scalar(a, i, end);
}

// The rounding of store_out8 (bf16 by integer rounding, f16 by F16C), as store_out lane by lane.
void narrow_range_avx2(const NarrowArgs& a, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) store_out8(a.dst, a.dst_dtype, i, _mm256_loadu_ps(a.src + i));
  narrow_range_scalar(a, i, end);
}

}  // namespace tandem::ops::detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
