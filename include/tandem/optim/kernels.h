// Flat optimizer kernels under the optimizer's names. They are ops of the core library
// (tandem/optim_ops.h documents them: formulas, SIMD levels, errors, thread-safety); the cpu
// backend implements the host kernels, so the core library owns them and the optimizer
// library only uses them. These declarations keep the names tandem::optim::adam_step,
// optim::AdamParams, optim::set_simd_level, ... for optimizer code, benchmarks and tests.
#pragma once

#include "tandem/optim_ops.h"

namespace tandem::optim {

using ops::SimdLevel;
using ops::simd_level_name;
using ops::parse_simd_level;
using ops::simd_level_supported;
using ops::best_simd_level;
using ops::simd_level;
using ops::set_simd_level;

using ops::AdamParams;
using ops::AdamConstants;
using ops::adam_constants;
using ops::adam_step;
using ops::adam_step_bf16_moments;

using ops::SgdParams;
using ops::SgdConstants;
using ops::sgd_constants;
using ops::sgd_step;

using ops::widen_to_f32;
using ops::narrow_from_f32;

}  // namespace tandem::optim
