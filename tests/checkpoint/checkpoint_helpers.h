// Shared by the checkpoint tests: a small synthetic run, a scratch folder, file bytes.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "tandem/data/synthetic_dataset.h"
#include "tandem/train/trainer.h"

namespace tandem::testing {

/// A fresh folder under /tmp, removed with everything in it when this goes.
struct ScratchDir {
  std::string path;
  explicit ScratchDir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() / ("tandem-ckpt-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// 480 training samples in batches of 16 (30 steps an epoch), read back every 4 steps (so
/// checkpoints fall between read-backs), 2 epochs, mlp, adamw with a cosine schedule.
inline train::TrainConfig small_config() {
  train::TrainConfig c;
  c.model = "mlp";
  c.epochs = 2;
  c.batch_size = 16;
  c.eval_batch_size = 64;
  c.threads = 1;
  c.num_workers = 0;
  c.progress = 0;
  c.log_interval = 4;
  c.lr = 5e-3;
  return c;
}

inline std::shared_ptr<const data::Dataset> train_set() { return std::make_shared<data::SyntheticDataset>(480, 1); }
inline std::shared_ptr<const data::Dataset> test_set() { return std::make_shared<data::SyntheticDataset>(128, 2); }

/// Trains `cfg` on the synthetic sets; returns the weights file's bytes and the figures.
struct Outcome {
  std::string weights;
  train::TrainResult result;
};
inline Outcome train_and_save(const train::TrainConfig& cfg, const std::string& weights_path) {
  train::Trainer t(cfg, train_set(), test_set());
  Outcome o;
  o.result = t.fit();
  t.save_weights(weights_path);
  o.weights = file_bytes(weights_path);
  return o;
}

}  // namespace tandem::testing
