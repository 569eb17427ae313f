// ZeroOptimizer: ZeRO stage 1 (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
// Training Trillion Parameter Models", section 5.1): the optimizer state is partitioned over
// the ranks. Each parameter has one owner rank: whole parameters, each owned by the rank whose
// shard of the flat concatenation of all parameters (registration order; tandem/shard_range.h,
// the shard rule of every layout) holds its middle element, so every rank computes the same
// plan; a rank's inner optimizer (make_optimizer: the same SIMD kernels) holds state for
// and updates only the parameters it owns, then each parameter is broadcast from its owner.
// The gradients are averaged on every rank before (GradReducer), so each update computes
// exactly what the unpartitioned optimizer computes: the weights are bit-identical. Its
// updates are ordered on the device's stream, as the inner optimizer's: nothing to flush. A
// checkpoint takes gathered_state() (the resident home that built it holds its type).
// Thread-safety: as Optimizer; every rank calls step() in the same order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tandem/comm/communicator.h"
#include "tandem/optim/optimizer.h"

namespace tandem::train {

class ZeroOptimizer final : public optim::Optimizer {
 public:
  /// `name` and `options` as optim::make_optimizer; `comm` takes the parameters' device tensors.
  ZeroOptimizer(const std::string& name, std::vector<nn::Parameter*> params, const optim::OptimizerOptions& options,
                comm::CommunicatorPtr comm);
  const char* name() const override { return inner_->name(); }
  /// This rank's state only (the parameters it owns).
  std::vector<nn::NamedTensor> state() const override { return inner_->state(); }
  /// A collective (every rank calls it at the same point): the whole state, as the
  /// unpartitioned optimizer's state() names it, each parameter's entries broadcast from its
  /// owner into fresh tensors on the parameters' device (checkpoints), enqueued on `stream` (the
  /// stream the steps ran on: the copies follow the last update, and whoever reads the tensors
  /// waits for it). Empty before the first step.
  std::vector<nn::NamedTensor> gathered_state(const Stream& stream) const;
  /// Takes the whole state (gathered_state() or the unpartitioned optimizer's) and keeps the
  /// entries of the parameters this rank owns. Throws as Optimizer::load_state.
  void load_state(const std::vector<nn::NamedTensor>& state, int64_t step_count) override;
  /// Parameters this rank owns, and the elements of them.
  int owned_params() const { return static_cast<int>(owned_.size()); }
  int64_t owned_elements() const { return owned_elements_; }
  /// Bytes of optimizer state this rank holds now (its moments or momentum buffers).
  size_t state_bytes() const;
  /// The inner optimizer's slots (the owned parameters have them).
  std::vector<std::pair<std::string, DType>> state_keys() const override { return inner_->state_keys(); }

 protected:
  void update_all() override;
  void update(size_t, nn::Parameter&) override;

 private:
  comm::CommunicatorPtr comm_;
  bool momentum_ = false;  // sgd with momentum: a momentum_buffer per parameter
  std::vector<int> owner_;  // per parameter
  std::vector<nn::Parameter*> owned_;
  int64_t owned_elements_ = 0;
  std::unique_ptr<optim::Optimizer> inner_;
};

}  // namespace tandem::train
