#include "tandem/optim/adam.h"

#include "tandem/error.h"
#include "tandem/optim/kernels.h"

namespace tandem::optim {

Adam::Adam(std::vector<nn::Parameter*> params, double lr, std::array<double, 2> betas, double eps,
           double weight_decay)
    : Adam("adam", false, std::move(params), lr, betas, eps, weight_decay) {}

Adam::Adam(const char* op, bool decoupled, std::vector<nn::Parameter*> params, double lr,
           std::array<double, 2> betas, double eps, double weight_decay)
    : Optimizer(op, std::move(params), lr),
      decoupled_(decoupled),
      betas_(betas),
      eps_(eps),
      weight_decay_(weight_decay) {
  TD_CHECK_ARG(betas[0] >= 0 && betas[0] < 1 && betas[1] >= 0 && betas[1] < 1, op_,
               "betas must lie in [0, 1), got ({}, {})", betas[0], betas[1]);
  TD_CHECK_ARG(eps >= 0, op_, "eps must be >= 0, got {}", eps);
  TD_CHECK_ARG(weight_decay >= 0, op_, "weight_decay must be >= 0, got {}", weight_decay);
}

AdamW::AdamW(std::vector<nn::Parameter*> params, double lr, std::array<double, 2> betas,
             double eps, double weight_decay)
    : Adam("adamw", true, std::move(params), lr, betas, eps, weight_decay) {}

void Adam::set_moments_dtype(DType dtype) {
  TD_CHECK_ARG(dtype == DType::f32 || dtype == DType::bf16, op_, "moments dtype: expected f32 or bf16, got {}",
               dtype_name(dtype));
  for (size_t i = 0; i < params().size(); ++i)
    TD_CHECK_ARG(!find_state(i, "exp_avg"), op_, "moments dtype: set before the first step (parameter {} has moments)",
                 param_name(i));
  moments_dtype_ = dtype;
}

void Adam::set_rounding_streams(std::vector<uint32_t> streams) {
  TD_CHECK_ARG(streams.empty() || streams.size() == params().size(), op_, "rounding streams: {} for {} parameters",
               streams.size(), params().size());
  rounding_streams_ = std::move(streams);
}

void Adam::prepare_state(size_t index, nn::Parameter& p) {
  if (!find_state(index, "exp_avg")) create_state(index, "exp_avg", p.value.shape(), moments_dtype_);
  if (!find_state(index, "exp_avg_sq")) create_state(index, "exp_avg_sq", p.value.shape(), moments_dtype_);
  if (!find_state(index, "step")) create_state(index, "step", {}, DType::i64);
}

void Adam::update(size_t index, nn::Parameter& p) {
  // Tensors are handles: copies stay valid when later slots are created.
  Tensor* found = find_state(index, "exp_avg");
  const Tensor exp_avg =
      found ? *found : create_state(index, "exp_avg", p.value.shape(), moments_dtype_);
  found = find_state(index, "exp_avg_sq");
  const Tensor exp_avg_sq =
      found ? *found : create_state(index, "exp_avg_sq", p.value.shape(), moments_dtype_);
  found = find_state(index, "step");
  const Tensor step = found ? *found : create_state(index, "step", {}, DType::i64);

  AdamParams ap;
  ap.lr = step_lr();
  ap.beta1 = betas_[0];
  ap.beta2 = betas_[1];
  ap.eps = eps_;
  ap.weight_decay = p.decay ? weight_decay_ : 0.0;
  ap.decoupled = decoupled_;
  ap.step = *step.data<int64_t>() + 1;
  // One noise stream per parameter (the unpartitioned optimizer's: set_rounding_streams).
  const uint32_t stream = rounding_streams_.empty() ? static_cast<uint32_t>(index) : rounding_streams_[index];
  ap.rounding_seed = stream * 0x9E3779B1u + 0x7F4A7C15u;
  if (gated_on_device() && moments_dtype_ == DType::bf16) {
    ops::adam_step_bf16_moments(static_cast<float*>(p.value.raw_data()), static_cast<const float*>(p.grad.raw_data()),
                                static_cast<uint16_t*>(exp_avg.raw_data()), static_cast<uint16_t*>(exp_avg_sq.raw_data()),
                                p.value.numel(), ap, p.compute.defined() ? p.compute.raw_data() : nullptr,
                                p.compute.defined() ? p.compute.dtype() : DType::f32);
  } else if (gated_on_device()) {
    // Where the device computes, on its memory (host-addressable): the host kernel.
    ops::adam_step(static_cast<float*>(p.value.raw_data()), static_cast<const float*>(p.grad.raw_data()),
                   static_cast<float*>(exp_avg.raw_data()), static_cast<float*>(exp_avg_sq.raw_data()),
                   p.value.numel(), ap, p.compute.defined() ? p.compute.raw_data() : nullptr,
                   p.compute.defined() ? p.compute.dtype() : DType::f32);
  } else {
    ops::adam_step(p.value, p.grad, exp_avg, exp_avg_sq, ap, p.compute);  // and the low-precision copy
  }  // on the parameter's device
  *step.data<int64_t>() = ap.step;  // only after a successful update (or launch)
}

std::vector<std::pair<std::string, DType>> Adam::state_keys() const {
  return {{"exp_avg", moments_dtype_}, {"exp_avg_sq", moments_dtype_}, {"step", DType::i64}};
}

}  // namespace tandem::optim
