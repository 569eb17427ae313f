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

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,fma,f16c")

#include "backend/cpu/cpu_optim_avx512_impl.h"

namespace tandem::ops::detail {

void adam_range_avx512(const AdamArgs& a, int64_t begin, int64_t end) {
  avx512_adam_range<false>(a, begin, end);
}

void sgd_range_avx512(const SgdArgs& a, int64_t begin, int64_t end) {
  avx512_sgd_range<false>(a, begin, end);
}

}  // namespace tandem::ops::detail

#pragma GCC pop_options
#pragma GCC diagnostic pop
