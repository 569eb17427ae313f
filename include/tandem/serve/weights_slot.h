// Versioned weight snapshots for serving. A publisher (the training thread, or `tandem serve`
// at start-up) hands over an immutable ServedWeights; WeightsSlot swaps it in atomically. A
// request takes the current snapshot when it is admitted and keeps that shared_ptr until it is
// answered, so a swap never changes the version a request in flight is answered by, and an
// old snapshot is freed once its last request finished.
// Thread-safety: WeightsSlot is safe for any number of publishers and readers; ServedWeights
// is immutable after construction (its copy's wait() may be called from any thread).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "tandem/safetensors.h"
#include "tandem/train/trainer.h"

namespace tandem::serve {

struct ServedWeights {
  int64_t version = 0;           // the training step the weights are from (0: a weights file)
  double test_accuracy = -1;     // last test accuracy in [0, 1] of these weights, -1 when unknown
  int64_t published_ns = 0;      // profile::now_ns() at publish, for publish-to-first-answer time
  std::shared_ptr<const train::WeightCopy> weights;  // state_dict tensors (host, after wait())
};

/// A WeightCopy of tensors already on the host (a weights file): wait() returns at once.
std::shared_ptr<const train::WeightCopy> host_weights(NamedTensors tensors);

class WeightsSlot {
 public:
  /// Makes `w` the current snapshot (versions are expected to grow; an older one is refused
  /// with Error(invalid_argument) naming both, so that answers never go back in version).
  void publish(std::shared_ptr<const ServedWeights> w);
  /// The current snapshot; null before the first publish.
  std::shared_ptr<const ServedWeights> current() const;
  /// Snapshots published so far.
  int64_t publishes() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const ServedWeights> current_;
  int64_t publishes_ = 0;
};

}  // namespace tandem::serve
