// A short training run on SyntheticDataset (80 training samples, 16 test samples), kept for
// comparison: the model's state_dict on the host, the last epoch's losses, and the device's
// high-water mark as `device_peak` reads it after the run (it is process-wide: run the run
// expected to use less first). Shared by the streaming tests on virt and on cuda.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "tandem/data/synthetic_dataset.h"
#include "tandem/train/trainer.h"

namespace tandem::testing {

struct TrainedState {
  std::vector<nn::NamedTensor> state;
  double train_loss = 0, test_loss = 0;
  size_t device_peak = 0;
};

inline TrainedState train_and_keep(const train::TrainConfig& c, const std::function<size_t()>& device_peak) {
  train::Trainer t(c, std::make_shared<data::SyntheticDataset>(80, 11), std::make_shared<data::SyntheticDataset>(16, 12));
  const train::TrainResult r = t.fit();
  TrainedState out;
  out.state = t.model().host_state_dict();
  out.train_loss = r.epochs.back().train_loss;
  out.test_loss = r.epochs.back().test_loss;
  out.device_peak = device_peak();
  return out;
}

}  // namespace tandem::testing
