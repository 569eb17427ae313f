// Online samples: labelled samples that arrive while a run trains (tandem train --serve:
// POST /v1/samples) and that the step loop mixes into its training batches
// (TrainConfig::online_mix, --online-mix FRACTION). The run draws from a source; the serving
// side (tandem/serve/online_buffer.h) implements it.
// Thread-safety: draw() is called by the training thread while other threads add samples;
// an implementation must allow that.
#pragma once

#include <cstdint>

namespace tandem::train {

class OnlineSampleSource {
 public:
  virtual ~OnlineSampleSource() = default;
  /// Writes up to `count` samples drawn from the source: each f32 [C, H, W] (the model's input,
  /// already through the evaluation transform) of `sample_numel` values at
  /// images + i * sample_numel, its label in [0, classes) at labels[i]. `step` (the global
  /// step, 0-based) keys the draw, so a run with the same source contents draws the same
  /// samples. Returns how many were written: 0 while the source is empty, else `count`
  /// (drawn with replacement). Throws Error(invalid_argument) when `sample_numel` is not the
  /// source's.
  virtual int64_t draw(int64_t count, int64_t sample_numel, float* images, int64_t* labels, uint64_t step) = 0;
};

}  // namespace tandem::train
