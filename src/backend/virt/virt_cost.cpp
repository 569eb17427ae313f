// The virt cost model: FLOPs per op call and the roofline time (formulas in virt_cost.h).
// One TANDEM_VIRT_FLOPS(<op>) per op of tandem/op_list.h; its parameters are the op's.
#include "virt_cost.h"

#include <algorithm>

#include "virt_cost_transformer.h"

namespace tandem::virt {

namespace {

double numel(const Tensor& t) { return t.defined() ? static_cast<double>(t.numel()) : 0.0; }

double numel(const std::vector<Tensor>& ts) {
  double n = 0;
  for (const Tensor& t : ts) n += numel(t);
  return n;
}

// Rows of a linear layer's input or output gradient [rows, features].
int64_t rows(const Tensor& t) { return t.dim() > 0 ? t.shape()[0] : 0; }

}  // namespace

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

double max_pool2d_forward_flops(const Shape& y, int64_t kernel_h, int64_t kernel_w) {
  return static_cast<double>(shape_numel(y)) * static_cast<double>(kernel_h) *
         static_cast<double>(kernel_w);
}

TANDEM_VIRT_FLOPS(conv2d_forward) { return conv2d_flops(w.shape(), y.shape(), b.defined()); }
TANDEM_VIRT_FLOPS(conv2d_backward_data) { return conv2d_flops(w.shape(), dy.shape(), false); }
TANDEM_VIRT_FLOPS(conv2d_backward_weights) { return conv2d_flops(dw.shape(), dy.shape(), db.defined()); }
TANDEM_VIRT_FLOPS(linear_forward) { return linear_flops(rows(x), w.shape(), b.defined()); }
TANDEM_VIRT_FLOPS(linear_backward_data) { return linear_flops(rows(dy), w.shape(), false); }
TANDEM_VIRT_FLOPS(linear_backward_weights) { return linear_flops(rows(x), dw.shape(), db.defined()); }
TANDEM_VIRT_FLOPS(batch_norm_forward_training) { return 7 * numel(x); }
TANDEM_VIRT_FLOPS(batch_norm_forward_inference) { return 2 * numel(x); }
TANDEM_VIRT_FLOPS(batch_norm_backward) { return 9 * numel(x); }
TANDEM_VIRT_FLOPS(max_pool2d_forward) { return max_pool2d_forward_flops(y.shape(), p.kernel_h, p.kernel_w); }
TANDEM_VIRT_FLOPS(max_pool2d_backward) { return numel(dx); }
TANDEM_VIRT_FLOPS(global_avg_pool2d_forward) { return numel(x); }
TANDEM_VIRT_FLOPS(global_avg_pool2d_backward) { return numel(dx); }
TANDEM_VIRT_FLOPS(relu_forward) { return numel(x); }
TANDEM_VIRT_FLOPS(relu_backward) { return numel(dy); }
TANDEM_VIRT_FLOPS(add_relu_forward) { return 2 * numel(y); }
TANDEM_VIRT_FLOPS(dropout_forward) { return 2 * numel(x); }
TANDEM_VIRT_FLOPS(dropout_backward) { return numel(dy); }
TANDEM_VIRT_FLOPS(add_) { return 2 * numel(dst); }
TANDEM_VIRT_FLOPS(scale_) { return numel(dst); }
TANDEM_VIRT_FLOPS(zero_) { return 0; }
TANDEM_VIRT_FLOPS(softmax_cross_entropy_forward) { return 5 * numel(logits); }
TANDEM_VIRT_FLOPS(softmax_cross_entropy_backward) { return 3 * numel(probs); }
TANDEM_VIRT_FLOPS(count_correct) { return numel(logits); }
TANDEM_VIRT_FLOPS(softmax_cross_entropy_accumulate) { return 6 * numel(logits); }
TANDEM_VIRT_FLOPS(adam_step) { return 15 * numel(param); }
TANDEM_VIRT_FLOPS(sgd_step) { return 6 * numel(param); }
TANDEM_VIRT_FLOPS(amp_scale) { return numel(src); }
TANDEM_VIRT_FLOPS(amp_unscale_check_) { return 2 * numel(grads); }
TANDEM_VIRT_FLOPS(amp_update_scale_) { return 4; }
TANDEM_VIRT_FLOPS(clip_grad_norm_) { return 3 * numel(grads); }
TANDEM_VIRT_FLOPS(run_if_finite) {
  double n = 0;
  for (const Tensor& t : touched)
    if (!t.device().is_host()) n += numel(t);
  return n;
}

// The transformer ops (formulas in virt_cost_transformer.h).
TANDEM_VIRT_FLOPS(embedding_forward) { return embedding_flops(tokens.numel(), wte.size(1), false); }
TANDEM_VIRT_FLOPS(embedding_backward) { return embedding_flops(tokens.numel(), dy.size(2), true); }
TANDEM_VIRT_FLOPS(layer_norm_forward) { return layer_norm_flops(x.numel(), false); }
TANDEM_VIRT_FLOPS(layer_norm_backward) { return layer_norm_flops(x.numel(), true); }
TANDEM_VIRT_FLOPS(gelu_forward) { return gelu_flops(x.numel(), false); }
TANDEM_VIRT_FLOPS(gelu_backward) { return gelu_flops(x.numel(), true); }
TANDEM_VIRT_FLOPS(add_forward) { return add_flops(y.numel()); }
TANDEM_VIRT_FLOPS(attention_forward) {
  return attention_flops(qkv.size(0), qkv.size(1), qkv.size(2) / 3, n_head, false);
}
TANDEM_VIRT_FLOPS(attention_backward) {
  return attention_flops(qkv.size(0), qkv.size(1), qkv.size(2) / 3, n_head, true);
}
// w [in, out]: the products of linear_* with the weight transposed.
TANDEM_VIRT_FLOPS(linear_in_out_forward) { return linear_flops(rows(x), {w.size(1), w.size(0)}, b.defined()); }
TANDEM_VIRT_FLOPS(linear_in_out_backward_data) { return linear_flops(rows(dy), {w.size(1), w.size(0)}, false); }
TANDEM_VIRT_FLOPS(linear_in_out_backward_weights) {
  return linear_flops(rows(x), {dw.size(1), dw.size(0)}, db.defined());
}
TANDEM_VIRT_FLOPS(classifier_cross_entropy) {
  return classifier_flops(h.size(0), h.size(1), w.size(0), dh.defined() || dw.defined());
}

double modelled_seconds(const OpCost& cost, double tflops, double gbps) {
  double s = 0;
  if (tflops > 0) s = std::max(s, cost.flops / (tflops * 1e12));
  if (gbps > 0) s = std::max(s, cost.bytes / (gbps * 1e9));
  return std::min(s, 1e6);
}

}  // namespace tandem::virt
