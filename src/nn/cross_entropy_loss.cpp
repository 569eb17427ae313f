#include "tandem/nn/cross_entropy_loss.h"

#include "nn/module_util.h"
#include "tandem/ops.h"

namespace tandem::nn {

CrossEntropyLoss::CrossEntropyLoss(float label_smoothing) : label_smoothing_(label_smoothing) {
  TD_CHECK_ARG(label_smoothing >= 0.0f && label_smoothing <= 1.0f, "CrossEntropyLoss",
               "label_smoothing must be in [0, 1], found {}", label_smoothing);
}

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& labels) {
  TD_CHECK_ARG(logits.dim() == 2, "CrossEntropyLoss", "expected logits [N, C], found {}", shape_str(logits.shape()));
  const Tensor& probs = detail::reuse(probs_, logits.shape(), logits.device());
  const float loss = ops::softmax_cross_entropy_forward(logits, labels, label_smoothing_, probs);
  labels_ = labels;
  logits_dtype_ = logits.dtype();
  return Tensor::full({}, loss);
}

void CrossEntropyLoss::forward_accumulate(const Tensor& logits, const Tensor& labels, const Tensor& metrics) {
  TD_CHECK_ARG(logits.dim() == 2, "CrossEntropyLoss", "expected logits [N, C], found {}", shape_str(logits.shape()));
  const Tensor& probs = detail::reuse(probs_, logits.shape(), logits.device());
  ops::softmax_cross_entropy_accumulate(logits, labels, label_smoothing_, probs, metrics);
  labels_ = labels;
  logits_dtype_ = logits.dtype();
}

Tensor CrossEntropyLoss::backward() {
  if (!labels_.defined()) detail::no_forward("CrossEntropyLoss");
  const Tensor& d = detail::reuse(dlogits_, probs_.shape(), probs_.device(), logits_dtype_);
  ops::softmax_cross_entropy_backward(probs_, labels_, label_smoothing_, 1.0f, d);
  return d;
}

Tensor CrossEntropyLoss::backward_f32() {
  if (!labels_.defined()) detail::no_forward("CrossEntropyLoss");
  const Tensor& d = detail::reuse(dlogits_f32_, probs_.shape(), probs_.device());
  ops::softmax_cross_entropy_backward(probs_, labels_, label_smoothing_, 1.0f, d);
  return d;
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) { return ops::count_correct(logits, labels); }

}  // namespace tandem::nn
