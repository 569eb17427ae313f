// Internal: the cuda backend's dtype table (tandem/op_support.h): the shared default
// (op_support_default.h), f32, bf16 and f16 for every op (cuDNN and cuBLAS on tensor cores
// with f32 accumulation, own kernels for the rest, cuBLAS for the classifier's products) but
// those that work on f32 master weights, gradients and the scaler's state; zero_ in every
// dtype. Plain constexpr data without CUDA headers, so the tests read it in every build.
#pragma once

#include "backend/op_support_default.h"

namespace tandem::ops {

inline constexpr OpSupport kCudaSupport = kDefaultOpSupport;

}  // namespace tandem::ops
