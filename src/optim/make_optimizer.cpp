#include "tandem/error.h"
#include "tandem/optim/adam.h"
#include "tandem/optim/optimizer.h"
#include "tandem/optim/sgd.h"

namespace tandem::optim {

void check_optimizer_name(const std::string& name) {
  TD_CHECK_ARG(name == "sgd" || name == "adam" || name == "adamw", "optimizer",
               "unknown optimizer '{}' (expected sgd, adam or adamw)", name);
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name,
                                          std::vector<nn::Parameter*> params,
                                          const OptimizerOptions& o) {
  check_optimizer_name(name);
  if (name == "sgd")
    return std::make_unique<SGD>(std::move(params), o.lr, o.momentum, o.nesterov,
                                 o.weight_decay.value_or(0.0));
  TD_CHECK_ARG(o.moments_dtype == DType::f32 || name != "sgd", "optimizer",
               "bf16 moments: expected adam or adamw, got {}", name);
  std::unique_ptr<Adam> adam;
  if (name == "adam")
    adam = std::make_unique<Adam>(std::move(params), o.lr, o.betas, o.eps, o.weight_decay.value_or(0.0));
  else
    adam = std::make_unique<AdamW>(std::move(params), o.lr, o.betas, o.eps, o.weight_decay.value_or(0.01));
  adam->set_moments_dtype(o.moments_dtype);
  return adam;
}

}  // namespace tandem::optim
