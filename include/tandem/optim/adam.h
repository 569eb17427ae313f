// Adam (Kingma & Ba 2015) and AdamW (Loshchilov & Hutter 2019), as torch.optim.Adam and
// torch.optim.AdamW (amsgrad off): see adam_step in tandem/optim/kernels.h for the update.
// Adam applies weight_decay as L2 (added to the gradient); AdamW decays the weights
// (param *= 1 - lr*weight_decay, from the previous weights).
// State per parameter: "exp_avg" and "exp_avg_sq" (the parameter's shape; f32, or bf16 with
// set_moments_dtype: stored with stochastic rounding, half the bytes) and "step" (i64 scalar,
// the parameter's own update count, which sets the bias corrections).
// Thread-safety: as Optimizer.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tandem/optim/optimizer.h"

namespace tandem::optim {

class Adam : public Optimizer {
 public:
  ~Adam() override { wait_gated(); }
  /// Throws Error(invalid_argument) for negative lr, eps or weight_decay, or betas outside
  /// [0, 1).
  Adam(std::vector<nn::Parameter*> params, double lr = 1e-3,
       std::array<double, 2> betas = {0.9, 0.999}, double eps = 1e-8, double weight_decay = 0.0);

  const char* name() const override { return decoupled_ ? "adamw" : "adam"; }
  std::array<double, 2> betas() const { return betas_; }
  double eps() const { return eps_; }
  double weight_decay() const { return weight_decay_; }
  /// The dtype of exp_avg and exp_avg_sq: f32 (the default) or bf16 (rounded stochastically
  /// at each store, as torchao's bf16 AdamW; the update itself runs in f32; host devices only:
  /// a step on cuda throws Error(not_available)). Call before the first step (the moments are
  /// created then). Throws Error(invalid_argument) for another dtype or once moments exist.
  void set_moments_dtype(DType dtype);
  DType moments_dtype() const { return moments_dtype_; }
  /// bf16 moments of an optimizer over a part of another's parameters (ZeRO: a rank's owned
  /// parameters, or its shards' pieces): per parameter of params() (in order), the index whose
  /// noise stream its stochastic rounding draws (AdamParams::rounding_seed), instead of its own
  /// index: a whole parameter's index in the unpartitioned optimizer draws that optimizer's
  /// noise, so the update gives its bits. Empty (the default): params()'s own indices. Throws
  /// Error(invalid_argument) for a size other than params()'s.
  void set_rounding_streams(std::vector<uint32_t> streams);
  std::vector<std::pair<std::string, DType>> state_keys() const override;

 protected:
  Adam(const char* op, bool decoupled, std::vector<nn::Parameter*> params, double lr,
       std::array<double, 2> betas, double eps, double weight_decay);
  void update(size_t index, nn::Parameter& p) override;
  void prepare_state(size_t index, nn::Parameter& p) override;

 private:
  bool decoupled_;
  std::array<double, 2> betas_;
  double eps_;
  double weight_decay_;
  DType moments_dtype_ = DType::f32;
  std::vector<uint32_t> rounding_streams_;
};

class AdamW : public Adam {
 public:
  /// Same checks as Adam.
  AdamW(std::vector<nn::Parameter*> params, double lr = 1e-3,
        std::array<double, 2> betas = {0.9, 0.999}, double eps = 1e-8, double weight_decay = 0.01);
};

}  // namespace tandem::optim
