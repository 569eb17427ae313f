// AVX-512 F/BW kernels (bf16 output by integer rounding).
// Compiled for that target through a pragma; the dispatcher calls these only when the CPU
// has the features. The bodies are in cpu_optim_avx512_impl.h.
// GCC 12's AVX-512 intrinsics initialise their "undefined" vectors from themselves, which
// -Wmaybe-uninitialized reports at the intrinsic header's lines when inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstdint>

// Headers with external-linkage inline functions come before the target pragma, so none
// of them is emitted here with AVX-512 code.
#include "backend/cpu/cpu_optim_args.h"
#include "tandem/dtype.h"

// clang ignores GCC's target pragma; its own attribute pragma gives every function below
// the same target.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,fma,f16c")
#endif

#include "backend/cpu/cpu_optim_avx512_impl.h"

namespace tandem::ops::detail {

void adam_range_avx512(const AdamArgs& a, int64_t begin, int64_t end) {
  if (a.exp_avg16) return adam_range_avx2(a, begin, end);  // bf16 moments: the AVX2 lanes (same bits)
  avx512_adam_range<false>(a, begin, end);
}

void sgd_range_avx512(const SgdArgs& a, int64_t begin, int64_t end) {
  avx512_sgd_range<false>(a, begin, end);
}

// bf16: the bits shifted into the upper half; f16: the exact hardware conversion.
void widen_range_avx512(const WidenArgs& a, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.src + i));
    const __m512 x = a.src_dtype == DType::bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
                                                : _mm512_cvtph_ps(h);
    _mm512_storeu_ps(a.dst + i, x);
  }
  widen_range_scalar(a, i, end);
}

// The rounding of avx512_store_out (bf16 by integer rounding, f16 by the hardware conversion).
void narrow_range_avx512(const NarrowArgs& a, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) avx512_store_out<false>(a.dst, a.dst_dtype, i, _mm512_loadu_ps(a.src + i));
  narrow_range_scalar(a, i, end);
}

}  // namespace tandem::ops::detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop
