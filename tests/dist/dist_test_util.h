// Shared by the data-parallel tests: runs of the Trainer on ranks that are threads of this
// process (comm::LocalGroup), on small synthetic sets.
#pragma once

#include <memory>
#include <vector>

#include "on_ranks.h"
#include "tandem/comm/local.h"
#include "tandem/data/synthetic_dataset.h"
#include "tandem/train/trainer.h"

namespace tandem::testing {

/// 20 steps of batch 16 for one process (320 samples, one epoch), mlp, read back every 5 steps.
inline train::TrainConfig dist_config(const std::string& optimizer) {
  train::TrainConfig c;
  c.model = "mlp";
  c.epochs = 1;
  c.batch_size = 16;
  c.eval_batch_size = 50;
  c.threads = 1;
  c.num_workers = 0;
  c.progress = 0;
  c.log_interval = 5;
  c.optimizer = optimizer;
  c.lr = optimizer == "sgd" ? 0.05 : 5e-3;
  c.schedule = "constant";
  c.warmup_epochs = 0;
  c.dist_timeout = 60;
  return c;
}

inline std::shared_ptr<const data::Dataset> dist_train_set() {
  return std::make_shared<data::SyntheticDataset>(320, 11);
}
inline std::shared_ptr<const data::Dataset> dist_test_set(int64_t n = 100) {
  return std::make_shared<data::SyntheticDataset>(n, 12);
}

/// The model's parameters after training, as host float vectors in state_dict order.
inline std::vector<std::vector<float>> trained_weights(train::Trainer& t) {
  std::vector<std::vector<float>> out;
  for (const nn::NamedTensor& nt : t.model().host_state_dict()) {
    if (nt.tensor.dtype() != DType::f32) continue;
    const float* p = nt.tensor.data<float>();
    out.emplace_back(p, p + nt.tensor.numel());
  }
  return out;
}

}  // namespace tandem::testing
