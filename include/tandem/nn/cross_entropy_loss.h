// CrossEntropyLoss: softmax cross-entropy with mean reduction and optional label smoothing
// (torch.nn.CrossEntropyLoss(label_smoothing=e)): target q = (1 - e) * onehot + e / C,
// loss = mean_n -sum_c q_c log softmax(logits_n)_c.
// Thread-safety: one thread at a time.
#pragma once

#include <vector>

#include "tandem/op_support.h"
#include "tandem/tensor.h"

namespace tandem::nn {

class CrossEntropyLoss {
 public:
  /// 0 <= label_smoothing <= 1, else Error(invalid_argument).
  explicit CrossEntropyLoss(float label_smoothing = 0.0f);

  /// logits [N, C] f32, bf16 or f16 (softmax and the loss are computed in f32; the gradient
  /// has the logits' dtype), labels [N] i64 in [0, C) -> 0-d f32 loss. Throws
  /// Error(invalid_argument) for bad shapes or a label out of range.
  Tensor forward(const Tensor& logits, const Tensor& labels);
  /// The forward without a host read-back (it blocks the host on no device): adds the batch's
  /// loss sum, correct rows, row count and invalid-label rows to metrics [4] f32 on the
  /// logits' device (ops::softmax_cross_entropy_accumulate); backward() then works as after
  /// forward(). A label out of range does not throw here: it is counted in metrics[3].
  void forward_accumulate(const Tensor& logits, const Tensor& labels, const Tensor& metrics);
  /// dloss/dlogits [N, C] for the last forward (gradient of the mean loss).
  Tensor backward();
  /// The same gradient in f32 whatever the logits' dtype (what a loss scaler multiplies before
  /// rounding to the compute dtype, so small gradients do not flush to zero first).
  Tensor backward_f32();

  float label_smoothing() const { return label_smoothing_; }
  /// The backend ops forward, forward_accumulate, backward and count_correct call.
  static std::vector<ops::Op> ops_used() {
    return {ops::Op::softmax_cross_entropy_forward, ops::Op::softmax_cross_entropy_accumulate,
            ops::Op::softmax_cross_entropy_backward, ops::Op::count_correct};
  }

 private:
  float label_smoothing_;
  Tensor probs_, labels_, dlogits_, dlogits_f32_;
  DType logits_dtype_ = DType::f32;  // dlogits has the logits' dtype
};

/// Number of rows whose argmax over logits [N, C] equals labels [N] (i64).
int64_t count_correct(const Tensor& logits, const Tensor& labels);

}  // namespace tandem::nn
