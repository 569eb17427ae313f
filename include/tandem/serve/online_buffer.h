// OnlineBuffer: the bounded buffer of labelled samples that POST /v1/samples fills and that
// training mixes into its batches (train::OnlineSampleSource, --online-mix). It holds the
// samples as the model's input (f32 [C, H, W], after the evaluation transform) with their
// labels; when full, the oldest samples are replaced. add() takes a whole request or nothing.
// draw() picks samples uniformly with replacement by Philox(seed, step): the same contents
// and step give the same draw.
// Thread-safety: add(), draw(), size() from any thread (one mutex).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "tandem/tensor.h"
#include "tandem/train/online_samples.h"

namespace tandem::serve {

class OnlineBuffer final : public train::OnlineSampleSource {
 public:
  /// `capacity` samples (>= 1) of `sample_numel` f32 values each, labels in [0, num_classes).
  /// Throws Error(invalid_argument) for a capacity or sizes below 1.
  OnlineBuffer(int64_t capacity, int64_t sample_numel, int64_t num_classes, uint64_t seed);
  /// Adds `images` f32 [N, C, H, W] (N * sample_numel values) with `labels` (N values, each in
  /// [0, num_classes), else Error(invalid_argument) naming the record and nothing is added).
  /// Returns the buffer's size after.
  int64_t add(const Tensor& images, const std::vector<int64_t>& labels);
  int64_t draw(int64_t count, int64_t sample_numel, float* images, int64_t* labels, uint64_t step) override;
  int64_t size() const;
  int64_t capacity() const { return capacity_; }
  /// Samples accepted in all (replaced ones included) and samples drawn by training.
  int64_t added() const;
  int64_t drawn() const;

 private:
  int64_t capacity_, numel_, classes_;
  uint64_t seed_;
  mutable std::mutex mu_;
  std::vector<float> images_;     // [capacity, numel]
  std::vector<int64_t> labels_;   // [capacity]
  int64_t size_ = 0, next_ = 0, added_ = 0, drawn_ = 0;
};

}  // namespace tandem::serve
