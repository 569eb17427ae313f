// The virt cost model: FLOPs per op call and the roofline time (formulas in virt_cost.h).
#include "virt_cost.h"

#include <algorithm>

namespace tandem::virt {

double conv2d_flops(const Shape& w, const Shape& y, bool bias) {
  if (w.size() != 4 || y.size() != 4) return 0;
  const double outputs = static_cast<double>(shape_numel(y));  // N*K*P*Q
  const double per_output =
      static_cast<double>(w[1]) * static_cast<double>(w[2]) * static_cast<double>(w[3]);
  return 2 * outputs * per_output + (bias ? outputs : 0);
}

double linear_flops(int64_t rows, const Shape& w, bool bias) {
  if (w.size() != 2) return 0;
  const double outputs = static_cast<double>(rows) * static_cast<double>(w[0]);
  return 2 * outputs * static_cast<double>(w[1]) + (bias ? outputs : 0);
}

double flops_per_element(ops::Op op) {
  using ops::Op;
  switch (op) {
    case Op::batch_norm_forward_training:
      return 7;
    case Op::batch_norm_forward_inference:
      return 2;
    case Op::batch_norm_backward:
      return 9;
    case Op::max_pool2d_backward:
      return 1;
    case Op::global_avg_pool2d_forward:
      return 1;
    case Op::global_avg_pool2d_backward:
      return 1;
    case Op::add_relu_forward:
      return 2;
    case Op::relu_forward:
      return 1;
    case Op::relu_backward:
      return 1;
    case Op::dropout_forward:
      return 2;
    case Op::dropout_backward:
      return 1;
    case Op::add_:
      return 2;
    case Op::scale_:
      return 1;
    case Op::zero_:
      return 0;
    case Op::softmax_cross_entropy_forward:
      return 5;
    case Op::softmax_cross_entropy_backward:
      return 3;
    case Op::softmax_cross_entropy_accumulate:
      return 6;
    case Op::count_correct:
      return 1;
    case Op::adam_step:
      return 15;
    case Op::sgd_step:
      return 6;
    default:
      return 0;  // conv2d, linear, max_pool2d forward: not per element
  }
}

double max_pool2d_forward_flops(const Shape& y, int64_t kernel_h, int64_t kernel_w) {
  return static_cast<double>(shape_numel(y)) * static_cast<double>(kernel_h) *
         static_cast<double>(kernel_w);
}

double modelled_seconds(const OpCost& cost, double tflops, double gbps) {
  double s = 0;
  if (tflops > 0) s = std::max(s, cost.flops / (tflops * 1e12));
  if (gbps > 0) s = std::max(s, cost.bytes / (gbps * 1e9));
  return std::min(s, 1e6);
}

}  // namespace tandem::virt
