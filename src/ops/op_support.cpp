// The dtype query: op names, supports() and require() over the backend registry.
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
    case Op::relu_forward: return "relu_forward";
    case Op::relu_backward: return "relu_backward";
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

bool supports(Op op, DType dtype, Device device) {
  Backend* b = find_backend(device.kind);
  if (!b) {
    // A kind's backend registers with its runtime; create it as a first tensor would.
    try {
      (void)runtime(device.kind);
    } catch (const Error&) {
      return false;  // e.g. built without CUDA, or no CUDA device
    }
    b = find_backend(device.kind);
    if (!b) return false;
  }
  return b->supports(op, dtype);
}

void throw_unsupported(Op op, DType dtype, Device device) {
  throw_error(ErrorCode::not_available, op_name(op),
              fmt::format("{} is not supported on {}", dtype_name(dtype), device.str()));
}

void require(Op op, DType dtype, Device device) {
  if (!supports(op, dtype, device)) throw_unsupported(op, dtype, device);
}

}  // namespace tandem::ops
