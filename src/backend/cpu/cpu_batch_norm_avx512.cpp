// The batch-norm kernels of cpu_batch_norm_impl.h built for AVX-512 (F, BW, VL, DQ, BF16):
// 16 floats per vector and bf16 widening/rounding in registers. Called only when
// cpu::has_avx512() (cpu_isa.h). Headers with external-linkage inline functions come before
// the target pragma, so none of them is emitted here with AVX-512 code.
#include <omp.h>

#include <vector>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_loops.h"
#include "tandem/ops.h"

// clang ignores GCC's target pragma; its own attribute pragma gives every function below
// the same target.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")
#endif

#define TANDEM_BN_BUILD(name) name##_avx512
#include "backend/cpu/cpu_batch_norm_build.h"
#undef TANDEM_BN_BUILD

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
