// Arguments of the cpu backend's flat optimizer kernels after validation: pointers plus the
// per-call fp32 constants, the per-level range functions that consume them, and the
// dispatcher that picks the level and splits a call over OpenMP threads.
// Private to src/backend/cpu.
#pragma once

#include <cstdint>

#include "tandem/dtype.h"
#include "tandem/optim_constants.h"

namespace tandem::ops::detail {

struct AdamArgs {
  float* param;
  const float* grad;
  float* exp_avg;
  float* exp_avg_sq;
  void* out;  // null or n elements of out_dtype
  DType out_dtype;
  AdamConstants c;
  // bf16 moments (exp_avg and exp_avg_sq null): read widened, stored with stochastic rounding
  // from noise(seed, index) (src/backend/optim_element.h's stochastic_bf16).
  uint16_t* exp_avg16 = nullptr;
  uint16_t* exp_avg_sq16 = nullptr;
  uint32_t seed = 0;
};

struct SgdArgs {
  float* param;
  const float* grad;
  float* buf;  // null when momentum == 0
  void* out;
  DType out_dtype;
  SgdConstants c;
};

// A widening of 16-bit floats (bf16 or f16 bit patterns) to f32.
struct WidenArgs {
  const uint16_t* src;
  DType src_dtype;  // bf16 or f16
  float* dst;
};

// A rounding of f32 to 16-bit floats (bf16 or f16 bit patterns), nearest even.
struct NarrowArgs {
  const float* src;
  DType dst_dtype;  // bf16 or f16
  uint16_t* dst;
};

// Update elements [begin, end); begin is a multiple of 16 except possibly for the last tile.
using AdamRangeFn = void (*)(const AdamArgs&, int64_t begin, int64_t end);
using SgdRangeFn = void (*)(const SgdArgs&, int64_t begin, int64_t end);

void adam_range_scalar(const AdamArgs& a, int64_t begin, int64_t end);
void adam_range_avx2(const AdamArgs& a, int64_t begin, int64_t end);
void adam_range_avx512(const AdamArgs& a, int64_t begin, int64_t end);
void adam_range_avx512bf16(const AdamArgs& a, int64_t begin, int64_t end);
void sgd_range_scalar(const SgdArgs& a, int64_t begin, int64_t end);
void sgd_range_avx2(const SgdArgs& a, int64_t begin, int64_t end);
void sgd_range_avx512(const SgdArgs& a, int64_t begin, int64_t end);
void sgd_range_avx512bf16(const SgdArgs& a, int64_t begin, int64_t end);
using WidenRangeFn = void (*)(const WidenArgs&, int64_t begin, int64_t end);
void widen_range_scalar(const WidenArgs& a, int64_t begin, int64_t end);
void widen_range_avx2(const WidenArgs& a, int64_t begin, int64_t end);
void widen_range_avx512(const WidenArgs& a, int64_t begin, int64_t end);
using NarrowRangeFn = void (*)(const NarrowArgs&, int64_t begin, int64_t end);
void narrow_range_scalar(const NarrowArgs& a, int64_t begin, int64_t end);
void narrow_range_avx2(const NarrowArgs& a, int64_t begin, int64_t end);
void narrow_range_avx512(const NarrowArgs& a, int64_t begin, int64_t end);

/// Updates all n elements at the current SIMD level (simd_level()), in static contiguous
/// OpenMP tiles (the result does not depend on the thread count). Arguments already checked.
void adam_run(const AdamArgs& a, int64_t n);
void sgd_run(const SgdArgs& a, int64_t n);

}  // namespace tandem::ops::detail
