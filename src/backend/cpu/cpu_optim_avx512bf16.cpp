// AVX-512 kernels for CPUs that also have AVX-512 BF16 (bf16 output by VCVTNEPS2BF16).
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
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,fma,f16c")
#endif

#include "backend/cpu/cpu_optim_avx512_impl.h"

namespace tandem::ops::detail {

void adam_range_avx512bf16(const AdamArgs& a, int64_t begin, int64_t end) {
  if (a.exp_avg16) return adam_range_avx2(a, begin, end);  // bf16 moments: the AVX2 lanes (same bits)
  avx512_adam_range<true>(a, begin, end);
}

void sgd_range_avx512bf16(const SgdArgs& a, int64_t begin, int64_t end) {
  avx512_sgd_range<true>(a, begin, end);
}

}  // namespace tandem::ops::detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop
