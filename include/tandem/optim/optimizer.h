// Optimizer: updates a list of parameters from their gradients, one step() at a time, and
// keeps per-parameter state (moments, momentum buffers, step counts) as named host tensors
// for checkpoints. The arithmetic is the flat kernels of tandem/optim/kernels.h, so every
// optimizer runs at the SIMD level chosen there.
// Parameters are nn::Parameter: value and grad are contiguous f32 tensors of the same shape
// on one device. On the host the kernels run inline; on virt each update is one work item on
// the device's current stream (the same SIMD kernel on the raw device pointers, so results
// match the cpu bit for bit); on cuda the device kernels of tandem/cuda.h run on the
// device's default stream. State tensors live on the parameter's device, except the 0-d i64
// "step" counters, which stay on the host (the host computes each update's constants). step()
// does not block the host on virt or cuda. A parameter with requires_grad == false or an undefined grad is skipped by step()
// (its state is not created or advanced, as in PyTorch); weight decay applies only to
// parameters whose `decay` flag is set.
// The base holds what every optimizer has. One that runs elsewhere has the rest on its own
// class: the offloaded optimizer's host update (flush, pending upload, master copy:
// tandem/optim/offload.h), ZeRO-1's partitioned state (src/train/dist/zero_optimizer.h); the
// code that builds such an optimizer keeps its type.
// Thread-safety: an optimizer is used by one thread at a time; step() itself uses OpenMP
// threads inside the kernels.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tandem/nn/module.h"
#include "tandem/stream.h"
#include "tandem/tensor.h"

namespace tandem::optim {

class Optimizer {
 public:
  /// Waits for a gated step still queued on the device (it runs this optimizer's code; each
  /// subclass that overrides update() waits in its own destructor too: wait_gated()).
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// "sgd", "adam" or "adamw".
  virtual const char* name() const = 0;

  /// Updates every parameter that has a gradient, then increments step_count(). Throws
  /// Error(invalid_argument) naming the parameter when its grad's shape or dtype differs
  /// from its value's.
  void step();
  /// One step in parts, for updates that run while backward still produces other gradients
  /// (--param-device cpu: each block once its gradients reached the host). update_part updates
  /// the parameters at `indices` (into params()) as step() would, checking their gradients
  /// first (the same errors); finish_parts() then ends the step (step_count() + 1). Each
  /// parameter with a gradient belongs to exactly one part of a step; the result is step()'s,
  /// bit for bit, since every update reads only its own parameter. One thread at a time (any
  /// thread), and nothing else calls this optimizer until finish_parts(). Throws
  /// Error(invalid_argument) for an index out of range or with a skip gate set.
  void update_part(const std::vector<size_t>& indices);
  /// update_part at learning rate `lr` (not lr(): the training thread may already have set the
  /// next step's) on stand-ins: `as[k]` is updated in place of params()[indices[k]] (its value,
  /// grad, compute and decay; the state is that of index indices[k]), for updates that run while
  /// the training thread points the parameters themselves at device buffers (--param-device cpu
  /// --offload-delay 1). Throws as update_part, and Error(invalid_argument) when the sizes differ.
  void update_part(const std::vector<size_t>& indices, double lr, const std::vector<nn::Parameter*>& as);
  void finish_parts() { ++step_count_; }
  /// Sets every parameter's grad to zero (grads stay allocated; ops::zero_, so on virt and cuda
  /// it is enqueued on the device's stream).
  void zero_grad();

  /// Learning rate used by the next step(); set_lr throws Error(invalid_argument) for lr < 0.
  double lr() const { return lr_.load(std::memory_order_relaxed); }
  void set_lr(double lr);

  /// Number of step() calls so far (int64, never a narrower type); with a skip gate, the
  /// steps that ran (skipped ones are not counted). With a gate on a device that runs behind
  /// the host (virt), read it once the device ran the steps (after a read-back or a wait).
  int64_t step_count() const { return step_count_.load(std::memory_order_acquire); }

  /// Dynamic loss scaling (tandem/optim/loss_scaler.h): from now on each step() is one task on
  /// the parameters' device that runs only when state[ops::kFoundInf] == 0 at its turn in the
  /// stream (ops::run_if_finite), so a skipped step changes no parameter, moment, compute copy
  /// or step count, without a host sync. `lr_of_step`, when given, sets each step's lr from
  /// the steps taken before it (step_count() at that point: the schedule's clock then counts
  /// only the steps that ran), evaluated when the step runs; otherwise lr() is used. An
  /// undefined `state` removes the gate. Devices whose memory the host cannot address (cuda)
  /// throw Error(not_available) at step(). Not for offloaded optimizers (they gate nothing).
  void set_skip_gate(Tensor state, std::function<double(int64_t)> lr_of_step = {});

  const std::vector<nn::Parameter*>& params() const { return params_; }

  /// The state tensors that exist now, named "<parameter name>.<key>" with keys
  /// "exp_avg", "exp_avg_sq", "step" (Adam/AdamW; step is an i64 scalar []) or
  /// "momentum_buffer" (SGD with momentum). The tensors share storage with the optimizer:
  /// writing into them changes its state. A parameter gets its state at its first update.
  virtual std::vector<nn::NamedTensor> state() const;
  /// Restores state saved from state() and step_count(): each tensor is copied into the
  /// optimizer (creating the slot; copied to the device for device parameters, waiting for
  /// the copy). Throws Error(invalid_argument) for an unknown name or a
  /// shape/dtype that does not match the parameter, leaving the optimizer unchanged.
  virtual void load_state(const std::vector<nn::NamedTensor>& state, int64_t step_count);
  /// Keys and element types of the state slots each parameter gets at its first update (the
  /// parameter's shape; a 0-d "step" i64 counter on the host), as state() and load_state()
  /// name them: what a caller that holds the state elsewhere allocates (set_state_home).
  virtual std::vector<std::pair<std::string, DType>> state_keys() const = 0;

  /// Where a new state slot lives (MLX's optimizers own the maths, not the state's place):
  /// home(index, key, shape, dtype) returns the tensor slot `key` of parameter `index` is
  /// kept in, e.g. a view into a flat pinned buffer, or an undefined tensor for the default (a
  /// fresh tensor on the parameter's device). It is called when the slot is created (first
  /// update, load_state), on the thread that runs it; the slot is zero-filled then. A defined
  /// result must be contiguous with `shape` and `dtype`, on the device the default would use
  /// (else the creating call throws Error(invalid_argument)). Set it before the first step.
  using StateHome = std::function<Tensor(size_t index, const std::string& key, const Shape& shape, DType dtype)>;
  void set_state_home(StateHome home) { state_home_ = std::move(home); }

  /// Speculative updates (SuperOffload's speculation, then validation): an update that runs
  /// before the global gradient norm or the inf/NaN check is known is undone when the check
  /// says so. An Adam step is not exactly invertible, so what it overwrites is kept:
  /// save_part(indices, as) copies, before update_part(indices, lr, as), each stand-in's value
  /// and compute copy (as[k] for params()[indices[k]]) and the parameters' state slots (step
  /// counters included); restore_part(indices, as) writes those copies back, bit for bit, and
  /// zeroes a slot created since (the state before a first update). Host tensors only:
  /// Error(invalid_argument) otherwise, and from restore_part for an index never saved. The
  /// copies are kept per parameter index (reused from step to step: value, compute and state
  /// bytes once more in host memory). Called by the thread that runs update_part, never at the
  /// same time as an update of the same parameters.
  void save_part(const std::vector<size_t>& indices, const std::vector<nn::Parameter*>& as);
  void restore_part(const std::vector<size_t>& indices, const std::vector<nn::Parameter*>& as);

 protected:
  /// `op` names the optimizer in error messages. Throws Error(invalid_argument) for lr < 0,
  /// a null or non-f32/non-contiguous parameter, or two parameters with one name.
  Optimizer(const char* op, std::vector<nn::Parameter*> params, double lr);

  /// Updates the parameters of one step() after its checks passed; the default calls
  /// update() for every parameter with requires_grad and a defined grad.
  virtual void update_all();
  /// Updates parameter `index` (its grad is defined and matches its value). Inside a gated
  /// step it creates no state; where gated_on_device() it runs where the device computes and
  /// must use the host kernels of tandem/optim_ops.h on the tensors' raw pointers.
  virtual void update(size_t index, nn::Parameter& p) = 0;
  /// Creates the state slots update() needs for parameter `index` (called on the host before
  /// a gated step is enqueued); the default creates none.
  virtual void prepare_state(size_t index, nn::Parameter& p) {}
  /// Blocks until the last gated step ran or was skipped (subclass destructors call it, while
  /// their update() is still theirs).
  void wait_gated() const { last_gated_.synchronize(); }
  /// True while update() runs inside a gated step.
  bool in_gated_step() const { return in_gated_; }
  /// True while update() runs inside a gated step where the device computes (cpu, virt:
  /// host-addressable memory): then it must use the host kernels on raw pointers. A gated
  /// step on a device the host cannot address (cuda) runs on the calling thread once the gate
  /// was read back, and update() enqueues the device ops as in an ungated step.
  bool gated_on_device() const { return in_gated_ && gated_host_addressable_; }
  /// The learning rate update() uses: inside a gated step the one that step fixed when it ran
  /// (lr_of_step, or lr() when the step was enqueued), which a set_lr() for a later step made
  /// meanwhile on the host cannot change; otherwise lr().
  double step_lr() const { return in_gated_ ? gated_lr_ : in_part_ ? part_lr_ : lr(); }
  /// Sets step_count() (load_state of a subclass that keeps its own state).
  void set_step_count(int64_t step_count) { step_count_ = step_count; }
  /// The name of parameter `index` in state() ("param<i>" when the parameter has none).
  const std::string& param_name(size_t index) const { return names_[index]; }

  /// The slot `key` of parameter `index`, or nullptr when it does not exist yet.
  Tensor* find_state(size_t index, const std::string& key);
  /// Creates slot `key` of parameter `index`, zero-filled, with `shape` and `dtype`.
  Tensor& create_state(size_t index, const std::string& key, const Shape& shape, DType dtype);

  const char* op_;

 private:
  std::vector<nn::Parameter*> params_;
  std::vector<std::string> names_;  // parameter names ("param<i>" where empty)
  std::vector<std::vector<std::pair<std::string, Tensor>>> state_;  // per parameter
  void gated_step();
  void check_grad(size_t index) const;  // step()'s checks of one parameter's gradient
  void check_grad(size_t index, const nn::Parameter& p) const;
  std::atomic<double> lr_;  // a gated step sets it where the device runs
  std::atomic<int64_t> step_count_{0};
  Tensor gate_;                              // the scaler's state, or undefined
  std::function<double(int64_t)> lr_of_step_;
  Event last_gated_;  // completes when the last gated step ran (or was skipped)
  bool in_gated_ = false;
  double gated_lr_ = 0;  // written and read only inside a gated step (where it runs)
  bool in_part_ = false;  // inside update_part with an explicit lr (the updating thread only)
  double part_lr_ = 0;
  const nn::Parameter* part_as_ = nullptr;  // the stand-in being updated
  bool gated_host_addressable_ = true;
  StateHome state_home_;
  // save_part's copies, per parameter index (slots: the state keys that existed then).
  struct Saved {
    Tensor value, compute;
    std::vector<std::pair<std::string, Tensor>> slots;
    bool valid = false;
  };
  std::vector<Saved> saved_;
};

/// Options for make_optimizer; each optimizer reads the fields it has.
struct OptimizerOptions {
  double lr = 1e-3;
  double momentum = 0.0;  // sgd
  bool nesterov = false;  // sgd
  std::array<double, 2> betas = {0.9, 0.999};  // adam, adamw
  double eps = 1e-8;                           // adam, adamw
  /// Unset: 0 for sgd and adam, 0.01 for adamw (PyTorch's defaults).
  std::optional<double> weight_decay;
  DType moments_dtype = DType::f32;  // adam, adamw: exp_avg and exp_avg_sq (Adam::set_moments_dtype)
};

/// Builds "sgd", "adam" or "adamw". Throws Error(invalid_argument,
/// "[optimizer] unknown optimizer 'x' (expected sgd, adam or adamw)") for other names, and
/// the chosen optimizer's errors for bad options.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name,
                                          std::vector<nn::Parameter*> params,
                                          const OptimizerOptions& options = {});
/// Throws the unknown-optimizer error make_optimizer throws unless `name` is one it builds.
void check_optimizer_name(const std::string& name);

}  // namespace tandem::optim
