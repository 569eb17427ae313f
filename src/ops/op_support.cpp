// The dtype query: op names, supports() and require() over the backend registry.
#include <cstring>

#include "tandem/backend.h"
#include "tandem/stream.h"

namespace tandem::ops {

const char* op_name(Op op) {
  switch (op) {
    case Op::conv2d_forward: return "conv2d_forward";
    case Op::conv2d_backward_data: return "conv2d_backward_data";
    case Op::conv2d_backward_weights: return "conv2d_backward_weights";
    case Op::linear_forward: return "linear_forward";
    case Op::linear_backward_data: return "linear_backward_data";
    case Op::linear_backward_weights: return "linear_backward_weights";
    case Op::batch_norm_forward_training: return "batch_norm_forward_training";
    case Op::batch_norm_forward_inference: return "batch_norm_forward_inference";
    case Op::batch_norm_backward: return "batch_norm_backward";
    case Op::max_pool2d_forward: return "max_pool2d_forward";
    case Op::max_pool2d_backward: return "max_pool2d_backward";
    case Op::global_avg_pool2d_forward: return "global_avg_pool2d_forward";
    case Op::global_avg_pool2d_backward: return "global_avg_pool2d_backward";
    case Op::relu_forward: return "relu_forward";
    case Op::relu_backward: return "relu_backward";
    case Op::add_relu_forward: return "add_relu_forward";
    case Op::dropout_forward: return "dropout_forward";
    case Op::dropout_backward: return "dropout_backward";
    case Op::add_: return "add_";
    case Op::scale_: return "scale_";
    case Op::zero_: return "zero_";
    case Op::softmax_cross_entropy_forward: return "softmax_cross_entropy_forward";
    case Op::softmax_cross_entropy_backward: return "softmax_cross_entropy_backward";
    case Op::count_correct: return "count_correct";
    case Op::softmax_cross_entropy_accumulate: return "softmax_cross_entropy_accumulate";
    case Op::adam_step: return "adam_step";
    case Op::sgd_step: return "sgd_step";
  }
  return "?";
}

namespace {

bool known_op(Op op) {
  return static_cast<int>(op) < kOpCount;
}
bool known_dtype(DType t) {
  return std::strcmp(dtype_name(t), "?") != 0;
}
bool known_kind(DeviceKind k) {
  return std::strcmp(device_kind_name(k), "?") != 0;
}

// The backend of an existing device: the kind's runtime is created as a first tensor would
// (its backend registers with it) and checks the index; null when either is missing (built
// without CUDA, no CUDA device, an index past the device count).
Backend* existing_backend(Device device) {
  if (!known_kind(device.kind) || device.index < 0) return nullptr;
  try {
    (void)runtime_for(device);
  } catch (...) {
    return nullptr;
  }
  return find_backend(device.kind);
}

}  // namespace

bool supports(Op op, DType dtype, Device device) {
  if (!known_op(op) || !known_dtype(dtype)) return false;
  Backend* b = existing_backend(device);
  if (!b) return false;
  try {
    return b->supports(op, dtype);
  } catch (...) {
    return false;  // a probe that failed to run (e.g. out of memory) answers no
  }
}

void throw_unsupported(Op op, DType dtype, Device device) {
  const std::string name = known_op(op) ? op_name(op) : fmt::format("op {}", static_cast<int>(op));
  throw_error(ErrorCode::not_available, name,
              fmt::format("{} is not supported on {}", dtype_name(dtype), device.str()));
}

void require(Op op, DType dtype, Device device) {
  if (!supports(op, dtype, device)) throw_unsupported(op, dtype, device);
}

}  // namespace tandem::ops
