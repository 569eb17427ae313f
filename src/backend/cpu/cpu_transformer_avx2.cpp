// The transformer loop kernels (cpu_transformer_kernels.h) built for tandem's floor: AVX2,
// FMA and F16C (tandem refuses to start below it; tandem/cpu_isa.h), and the choice between
// this build and the AVX-512 one.
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_transformer_prelude.h"

// clang ignores GCC's target pragma; its own attribute pragma gives every function below
// the same target.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#define TANDEM_TRANSFORMER_KERNELS transformer_kernels_avx2
#include "backend/cpu/cpu_transformer_build.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace tandem::ops::cpu {

const TransformerKernels& transformer_kernels() {
  static const TransformerKernels& k = has_avx512() ? transformer_kernels_avx512() : transformer_kernels_avx2();
  return k;
}

}  // namespace tandem::ops::cpu
