// Internal: the shared default the backends' dtype tables (tandem/op_support.h) are built from,
// an entry for every op of tandem/op_list.h by the dtype rules of tandem/op_support.h. A
// backend's table is kDefaultOpSupport with its differences written out: with(op, dtypes)
// where its kernels run other dtypes (an explicit DTypes{} for an op it has no kernel for),
// without(op) to drop an entry. Plain constexpr data without backend headers.
#pragma once

#include "tandem/op_support.h"

namespace tandem::ops {

/// The data dtypes an op runs with unless its backend says otherwise: every dtype for zero_;
/// f32 only for the ops on f32 master weights, gradients and the scaler's state (adam_step,
/// sgd_step, amp_unscale_check_, amp_update_scale_, clip_grad_norm_, run_if_finite); f32, bf16
/// and f16 for every other op.
constexpr DTypes default_dtypes(Op op) {
  if (op == Op::zero_) return DTypes::all();
  if (op == Op::adam_step || op == Op::sgd_step || op == Op::amp_unscale_check_ || op == Op::amp_update_scale_ ||
      op == Op::clip_grad_norm_ || op == Op::run_if_finite)
    return DTypes{DType::f32};
  return kFloatDTypes;
}

/// default_dtypes(op) for every op of the list.
inline constexpr OpSupport kDefaultOpSupport = [] {
  OpSupport t{std::initializer_list<OpSupport::Entry>{}};
  for (int i = 0; i < kOpCount; ++i) t = t.with(static_cast<Op>(i), default_dtypes(static_cast<Op>(i)));
  return t;
}();

}  // namespace tandem::ops
