// The transformer loop kernels (cpu_transformer_kernels.h) built for AVX-512 (F, BW, VL, DQ:
// 16 floats per vector), used where cpu::has_avx512() (cpu_isa.h).
#include "backend/cpu/cpu_transformer_prelude.h"

// clang ignores GCC's target pragma; its own attribute pragma gives every function below
// the same target.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif
#define TANDEM_TRANSFORMER_KERNELS transformer_kernels_avx512
#include "backend/cpu/cpu_transformer_build.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
