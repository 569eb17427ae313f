// InferenceReplica: the serving copy of a model, on the serving device, with a compute stream
// of its own (tandem/compute_stream.h) and its own weights, so inference never waits for a
// training step and training never waits for inference. It loads a snapshot's weights when
// asked to answer with a version other than the loaded one (copied from the snapshot's host
// tensors; on a device, asynchronous copies on its stream), in eval mode (BatchNorm running
// statistics, no dropout).
// Thread-safety: made, used and destroyed by one thread (the batcher's), which it sets to
// `threads` compute threads (OpenMP's thread count is per calling thread).
#pragma once

#include <cstdint>
#include <memory>

#include "tandem/compute_stream.h"
#include "tandem/device.h"
#include "tandem/nn/module.h"
#include "tandem/serve/weights_slot.h"
#include "tandem/train/model_card.h"

namespace tandem::serve {

class InferenceReplica {
 public:
  /// Builds card.model for card.spec on `device` (seed 0; weights come from snapshots).
  /// Throws Error(not_available) for a device this build or machine lacks,
  /// Error(out_of_memory) when it cannot hold the model.
  InferenceReplica(const train::ModelCard& card, Device device, int threads);
  ~InferenceReplica();
  /// Class probabilities (softmax of the logits, computed in double on the host) f32 [N, K]
  /// on the host for `inputs` f32 [N, C, H, W] on the host (the card's spec), with the weights
  /// of `w` (waited for and loaded first when w.version is not loaded). Throws
  /// Error(format) when the snapshot's tensors are not the model's (names, shapes), device
  /// errors as the ops raise them.
  Tensor run(const Tensor& inputs, const ServedWeights& w);
  /// The version loaded, -1 before the first run.
  int64_t loaded_version() const { return loaded_; }
  /// True when run() had to load new weights for its last call.
  bool loaded_last() const { return loaded_last_; }
  const char* stream_text() const { return stream_.describe(); }

 private:
  void load(const ServedWeights& w);
  Device device_;
  OwnComputeStream stream_;
  nn::ModulePtr model_;
  const ServedWeights* loaded_ptr_ = nullptr;
  int64_t loaded_ = -1;
  bool loaded_last_ = false;
};

}  // namespace tandem::serve
