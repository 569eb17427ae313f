// AVX-512 (F + BW) kernel bodies, 16 lanes. Included by cpu_optim_avx512.cpp and
// cpu_optim_avx512bf16.cpp after their target pragma; everything here is `static` so each
// file gets its own copy for its own target. kBf16Insn selects the AVX-512 BF16
// conversion instruction for bf16 output. Lane operations mirror src/backend/optim_element.h exactly.
// Private to src/backend/cpu.
#pragma once

#include <immintrin.h>

#include "backend/cpu/cpu_optim_element.h"

namespace tandem::ops::detail {

// float -> bf16 by integer rounding: round to nearest even, NaN -> quiet NaN.
static inline __m256i avx512_bf16_int(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __m512i absu = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(absu, _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

template <bool kBf16Insn>
static inline __m256i avx512_bf16(__m512 x) {
  if constexpr (kBf16Insn) {
    // VCVTNEPS2BF16 rounds to nearest even and quiets NaNs but flushes subnormal inputs to
    // zero; subnormal lanes (rare) take the integer route so results match float_to_bf16.
    __m256i r = (__m256i)_mm512_cvtneps_pbh(x);
    const __m512i absu = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
    const __mmask16 sub = _mm512_cmplt_epu32_mask(absu, _mm512_set1_epi32(0x00800000)) &
                          _mm512_test_epi32_mask(absu, absu);
    if (sub) r = _mm256_mask_mov_epi16(r, sub, avx512_bf16_int(x));
    return r;
  } else {
    return avx512_bf16_int(x);
  }
}

template <bool kBf16Insn>
static inline void avx512_store_out(void* out, DType dtype, int64_t i, __m512 x) {
  if (dtype == DType::f32) {
    _mm512_storeu_ps(static_cast<float*>(out) + i, x);
  } else if (dtype == DType::bf16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(out) + i),
                        avx512_bf16<kBf16Insn>(x));
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(out) + i),
                        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

template <bool kBf16Insn>
static void avx512_adam_range(const AdamArgs& a, int64_t begin, int64_t end) {
  const __m512 beta1 = _mm512_set1_ps(a.c.beta1), omb1 = _mm512_set1_ps(a.c.one_minus_beta1),
               beta2 = _mm512_set1_ps(a.c.beta2), omb2 = _mm512_set1_ps(a.c.one_minus_beta2),
               sqrt_bc2 = _mm512_set1_ps(a.c.sqrt_bc2), eps = _mm512_set1_ps(a.c.eps),
               step_size = _mm512_set1_ps(a.c.step_size), l2 = _mm512_set1_ps(a.c.l2),
               lr_wd = _mm512_set1_ps(a.c.lr_wd);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m512 p = _mm512_loadu_ps(a.param + i);
    const __m512 g = _mm512_fmadd_ps(l2, p, _mm512_loadu_ps(a.grad + i));
    const __m512 m = _mm512_fmadd_ps(beta1, _mm512_loadu_ps(a.exp_avg + i), _mm512_mul_ps(omb1, g));
    const __m512 v = _mm512_fmadd_ps(beta2, _mm512_loadu_ps(a.exp_avg_sq + i),
                                     _mm512_mul_ps(_mm512_mul_ps(omb2, g), g));
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(v), sqrt_bc2), eps);
    const __m512 update = _mm512_fmadd_ps(_mm512_div_ps(m, denom), step_size, _mm512_mul_ps(lr_wd, p));
    const __m512 np = _mm512_sub_ps(p, update);
    _mm512_storeu_ps(a.exp_avg + i, m);
    _mm512_storeu_ps(a.exp_avg_sq + i, v);
    _mm512_storeu_ps(a.param + i, np);
    if (a.out) avx512_store_out<kBf16Insn>(a.out, a.out_dtype, i, np);
  }
  for (; i < end; ++i) adam_element(a, i);
}

template <bool kBf16Insn>
static void avx512_sgd_range(const SgdArgs& a, int64_t begin, int64_t end) {
  const __m512 lr_neg = _mm512_set1_ps(-a.c.lr), mom = _mm512_set1_ps(a.c.momentum),
               wd = _mm512_set1_ps(a.c.weight_decay);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m512 p = _mm512_loadu_ps(a.param + i);
    __m512 d = _mm512_fmadd_ps(wd, p, _mm512_loadu_ps(a.grad + i));
    if (a.buf) {
      const __m512 b = a.c.init_buffer ? d : _mm512_fmadd_ps(mom, _mm512_loadu_ps(a.buf + i), d);
      _mm512_storeu_ps(a.buf + i, b);
      d = a.c.nesterov ? _mm512_fmadd_ps(mom, b, d) : b;
    }
    const __m512 np = _mm512_fmadd_ps(lr_neg, d, p);
    _mm512_storeu_ps(a.param + i, np);
    if (a.out) avx512_store_out<kBf16Insn>(a.out, a.out_dtype, i, np);
  }
  for (; i < end; ++i) sgd_element(a, i);
}

}  // namespace tandem::ops::detail
