// Arguments of the flat optimizer kernels after validation: pointers plus the per-call
// fp32 constants, and the per-level range functions that consume them.
// Private to src/optim.
#pragma once

#include <cstdint>

#include "tandem/dtype.h"
#include "tandem/optim/kernels.h"

namespace tandem::optim::detail {

struct AdamArgs {
  float* param;
  const float* grad;
  float* exp_avg;
  float* exp_avg_sq;
  void* out;  // null or n elements of out_dtype
  DType out_dtype;
  AdamConstants c;
};

struct SgdArgs {
  float* param;
  const float* grad;
  float* buf;  // null when momentum == 0
  void* out;
  DType out_dtype;
  SgdConstants c;
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

}  // namespace tandem::optim::detail
