// Which dtypes each op runs with on each device: one query per (op, dtype, device) that
// callers (mixed precision, placement) ask before they run, answered by the device's backend.
//
// Dtype rules (every op in tandem/ops.h checks them; ops.h says per op which tensors are
// "data" tensors):
//  - An op's data tensors (x, w, y, dy, dx, logits, dlogits, dst, src) share one dtype, the
//    op's data dtype: f32, bf16 or f16. It is the dtype the query is asked about.
//  - Tensors that must stay f32 are f32 whatever the data dtype: biases and their gradients
//    (b, db), weight gradients (dw: fp32 master weights take fp32 gradients, computed with
//    fp32 accumulation from low-precision x and dy, never rounded to 16 bits), batch-norm
//    gamma/beta/running and saved statistics and dgamma/dbeta, softmax probabilities (probs),
//    the loss value and the metrics. Labels are i64, max-pool indices i32, dropout masks u8.
//  - zero_ clears bytes and accepts every dtype on every backend.
//  - adam_step and sgd_step update f32 master weights, gradients and moments: their data
//    dtype is f32 on every backend; the optional low-precision copy they write (out_dtype
//    f32, bf16 or f16) is not a data dtype and every backend writes all three.
//  - amp_scale's data dtype is its dst's (f32, bf16 or f16); amp_unscale_check_,
//    amp_update_scale_, clip_grad_norm_ and run_if_finite work on f32 gradients and the
//    scaler's f32 state: f32 only.
//  - Support is opt-in: each backend lists per op the dtypes it has kernels for (OpSupport,
//    below); an op without an entry answers no in every dtype, f32 included.
// An op called with a data dtype its backend does not support throws
// Error(not_available, "[<op>] <dtype> is not supported on <device>"), e.g.
// "[adam_step] bf16 is not supported on cpu".
//
// What the backends answer (their tables: src/backend/cpu/cpu_support.cpp,
// src/backend/cuda/cuda_support.h):
//  - cpu: f32, bf16 and f16 for every op but the f32-only ones above. bf16 is computed
//    natively where oneDNN has bf16 kernels at the instruction level in use (avx512 and up;
//    native dot products with avx512_bf16 and AMX), else stored in bf16 and computed in f32;
//    f16 is always stored only (oneDNN 2.6 has no f16 convolution or matmul on the CPU): the
//    storage wrapper (src/backend/cpu/cpu_f16.h) widens to f32, runs the f32 kernel and rounds
//    the outputs once. compute_note says when a dtype is stored only.
//  - virt: what cpu answers (it runs the cpu kernels).
//  - cuda: f32, bf16 and f16 for every op but the f32-only ones: cuDNN convolutions and
//    cuBLAS matrix products on tensor cores with f32 accumulation, own kernels for the rest;
//    compute_note is "" (computed natively).
//  - a device kind without a backend in this build (cuda when built without CUDA) supports
//    nothing.
// Thread-safety: all functions here are thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "tandem/device.h"
#include "tandem/dtype.h"
#include "tandem/op_list.h"

namespace tandem::ops {

/// Every backend op (tandem/ops.h, tandem/optim_ops.h, tandem/amp_ops.h), named as the
/// function, in the order of tandem/op_list.h.
enum class Op : uint8_t {
#define TANDEM_OP_ENUM_(name, ret) name,
  TANDEM_OPS(TANDEM_OP_ENUM_)
#undef TANDEM_OP_ENUM_
};

/// Number of values of Op (for iterating over all ops).
#define TANDEM_OP_COUNT_(name, ret) +1
inline constexpr int kOpCount = 0 TANDEM_OPS(TANDEM_OP_COUNT_);
#undef TANDEM_OP_COUNT_

/// A set of dtypes, e.g. DTypes{DType::f32, DType::bf16}. Thread-safety: a value.
class DTypes {
 public:
  constexpr DTypes() = default;
  constexpr DTypes(std::initializer_list<DType> dtypes) {
    for (DType t : dtypes) bits_ = static_cast<uint8_t>(bits_ | bit(t));
  }
  /// Every DType value.
  static constexpr DTypes all() {
    return DTypes{DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8};
  }
  constexpr bool has(DType t) const { return (bits_ & bit(t)) != 0; }
  constexpr bool operator==(const DTypes&) const = default;

 private:
  static constexpr uint8_t bit(DType t) {
    return static_cast<int>(t) < 8 ? static_cast<uint8_t>(1u << static_cast<int>(t)) : uint8_t{0};
  }
  uint8_t bits_ = 0;
};

/// f32, bf16 and f16: the float data dtypes.
inline constexpr DTypes kFloatDTypes{DType::f32, DType::bf16, DType::f16};

/// One backend's answers to the dtype query: per op, the data dtypes it has kernels for.
/// Support is opt-in: an op without an entry is supported in no dtype, and listed(op) tells
/// an explicit "none" from a missing entry (a test asks every backend for every op). Each
/// op appears at most once: a constexpr table that repeats one does not compile.
/// Thread-safety: a value; constexpr.
class OpSupport {
 public:
  struct Entry {
    Op op;
    DTypes dtypes;
  };
  constexpr OpSupport(std::initializer_list<Entry> entries) {
    for (const Entry& e : entries) {
      const int i = static_cast<int>(e.op);
      if (i >= kOpCount || listed_[i]) repeated_or_unknown_op();
      listed_[i] = true;
      dtypes_[i] = e.dtypes;
    }
  }
  /// Whether the table has an entry for `op` (false for values outside the enum).
  constexpr bool listed(Op op) const { return known(op) && listed_[static_cast<int>(op)]; }
  /// The data dtypes `op` runs with (none without an entry).
  constexpr DTypes dtypes(Op op) const { return known(op) ? dtypes_[static_cast<int>(op)] : DTypes{}; }
  constexpr bool supports(Op op, DType dtype) const { return dtypes(op).has(dtype); }
  /// A copy with `op`'s entry set to `dtypes` (a backend that wraps another and differs).
  constexpr OpSupport with(Op op, DTypes dtypes) const {
    OpSupport t = *this;
    if (known(op)) t.listed_[static_cast<int>(op)] = true, t.dtypes_[static_cast<int>(op)] = dtypes;
    return t;
  }
  /// A copy without an entry for `op`.
  constexpr OpSupport without(Op op) const {
    OpSupport t = *this;
    if (known(op)) t.listed_[static_cast<int>(op)] = false, t.dtypes_[static_cast<int>(op)] = DTypes{};
    return t;
  }

 private:
  static constexpr bool known(Op op) { return static_cast<int>(op) < kOpCount; }
  // A throw: reaching it while building a constexpr table is a compile error.
  static void repeated_or_unknown_op() { throw std::logic_error("OpSupport: an op listed twice or outside Op"); }
  bool listed_[kOpCount] = {};
  DTypes dtypes_[kOpCount] = {};
};

/// The op's function name, e.g. "conv2d_forward" (a static string).
const char* op_name(Op op);

/// True when `op` runs with data dtype `dtype` on `device`. False for dtypes that are never
/// data dtypes (i32, i64, u8) except for zero_, for every op on a device kind this build
/// has no backend for, on a device that does not exist (negative index, index >= the kind's
/// device count, e.g. virt:1 before set_virt_device_count), and for values outside the Op,
/// DType or DeviceKind enums. May create the device kind's runtime on first use (as the first
/// tensor on that device would). Never throws.
bool supports(Op op, DType dtype, Device device);

/// How `device` computes data dtype `dtype` when it stores but does not compute in it, e.g.
/// "f16 stored, computed in f32: oneDNN 2.6.3 has no f16 convolution or matmul on this CPU"
/// for cpu and virt; "" otherwise (and for a device without a backend). Never throws.
std::string compute_note(DType dtype, Device device);

/// Throws Error(not_available, "[<op>] <dtype> is not supported on <device>") unless
/// supports(op, dtype, device), e.g. "[conv2d_forward] f16 is not supported on cpu" (an Op
/// value outside the enum is named "op N").
void require(Op op, DType dtype, Device device);

/// Throws the error require() throws for (op, dtype, device), unconditionally.
[[noreturn]] void throw_unsupported(Op op, DType dtype, Device device);

}  // namespace tandem::ops
