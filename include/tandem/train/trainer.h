// Trainer: the step loop for one model on one device. It owns the model, the optimizer,
// the learning-rate schedule, the training and test loaders, and evaluation.
// Each step: batch (from loader workers) -> forward -> loss -> backward -> optimizer step.
// Devices (TrainConfig::device): "cpu"; "virt[:N][?speed=..&bw=..&latency_us=..&memory_mb=..]"
// (configure_virt applies the options); "cuda[:N]" where this build and machine have it. On
// a device the model, its gradients and the optimizer state live there (Module::to before
// the optimizer is built), batches come from pinned loader slots through a DevicePrefetcher
// (copy stream, 2 batches ahead), evaluation runs there too, and the host reads back only
// the loss and the correct count of each step (which waits for that step's forward).
// Thread-safety: one Trainer is driven by one thread; loader workers are internal.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/nn/module.h"
#include "tandem/train/config.h"

namespace tandem::train {

struct EpochStats {
  int epoch = 0;               // 1-based
  double train_loss = 0;       // mean over the epoch's samples
  double train_accuracy = 0;   // fraction in [0, 1], on augmented training batches
  double test_loss = 0;        // mean over the test set
  double test_accuracy = 0;    // fraction in [0, 1]
  double images_per_s = 0;     // training samples per second of step loop (evaluation excluded)
  double seconds = 0;          // wall time of the epoch's training loop, in seconds
  double lr = 0;               // learning rate at the epoch's last step
  size_t pinned_peak_bytes = 0;  // high-water mark of the pinned pool's reserved bytes at the
                                 // epoch's end (process-wide; levels off after warm-up)
};

struct TrainResult {
  std::vector<EpochStats> epochs;
  double best_test_accuracy = 0;
  int best_epoch = 0;
  double wall_seconds = 0;     // whole fit(), evaluation included
  double images_per_s = 0;     // training samples / training-loop seconds, all epochs
};

struct EvalResult {
  double loss = 0;        // mean cross-entropy
  double accuracy = 0;    // fraction in [0, 1]
  int64_t correct = 0;
  int64_t samples = 0;    // every test sample exactly once
};

struct TrainCallbacks {
  std::function<void(int epoch, int64_t steps)> on_epoch_begin;
  /// After each step: steps done this epoch, the step's loss, samples done this epoch.
  std::function<void(int64_t step, double loss, int64_t samples)> on_step;
  std::function<void(const EpochStats&)> on_epoch_end;
};

class Trainer {
 public:
  /// Validates the configuration, loads the dataset, builds the model and optimizer.
  /// Throws Error(invalid_argument) for bad flags, Error(io/format) for dataset problems,
  /// Error(not_available) for devices this build or machine lacks.
  explicit Trainer(const TrainConfig& cfg);
  ~Trainer();

  /// Trains cfg.epochs epochs, evaluating after each. Throws Error(numerical) naming the
  /// epoch and step when the loss becomes NaN or infinite (nothing is saved then).
  TrainResult fit(const TrainCallbacks& callbacks = {});
  /// Evaluates the current model on the test set (eval mode, running statistics).
  EvalResult evaluate();
  /// Writes the model's state_dict (parameters and buffers) as safetensors, atomically (device
  /// tensors are copied back to the host first).
  void save_weights(const std::string& path);
  /// One line: model, parameter count, device, optimizer, schedule, threads, workers.
  std::string describe() const;
  nn::Module& model();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Loads cfg.weights into cfg.model and evaluates it on the test set of cfg.data_dir.
/// Throws Error(format) when a tensor is missing or has the wrong shape or dtype (naming it).
EvalResult evaluate_weights(const TrainConfig& cfg);

/// Copies tensors from a state dict (as read by load_safetensors) into a module's state,
/// by name; every entry of the module must be present with the same shape.
void load_state(nn::Module& module, const std::vector<std::pair<std::string, Tensor>>& state,
                const std::string& source);

}  // namespace tandem::train
