// The batch-norm kernels of cpu_batch_norm_impl.h built for AVX2 + FMA + F16C (tandem's CPU
// floor): 8 floats per vector, fused multiply-adds. Called when ops::cpu_isa() is avx2 (the
// AVX-512 build runs above it; cpu_batch_norm.cpp). Headers with external-linkage inline
// functions come before the target pragma, so none of them is emitted here with AVX2 code.
#include <omp.h>

#include <vector>

#include "backend/cpu/cpu_batch_norm_avx2.h"
#include "backend/cpu/cpu_loops.h"
#include "tandem/ops.h"

// clang ignores GCC's target pragma; its own attribute pragma gives every function below
// the same target.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#define TANDEM_BN_BUILD(name) name##_avx2
#include "backend/cpu/cpu_batch_norm_build.h"
#undef TANDEM_BN_BUILD

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
