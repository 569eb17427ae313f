// make_model: the model names and the steps every model gets (init, fusion, no input gradient).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nn/models/families.h"
#include "tandem/nn/fusion.h"
#include "tandem/nn/models.h"

namespace tandem::nn {

std::vector<std::string> model_names() {
  return {"fmnist-cnn", "mlp", "resnet18", "resnet34", "resnet50", "resnet18-cifar"};
}

void check_model_name(const std::string& name) {
  const std::vector<std::string> names = model_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw_error(ErrorCode::invalid_argument, "model",
                fmt::format("unknown model '{}' (expected {})", name, fmt::join(names, ", ")));
}

ModulePtr make_model(const std::string& name, const ModelSpec& spec, uint64_t seed) {
  check_model_name(name);
  TD_CHECK_ARG(spec.channels >= 1 && spec.height >= 1 && spec.width >= 1 && spec.num_classes >= 1, "model",
               "{}: expected a sample shape and a class count of at least 1, found {}x{}x{} and {} classes", name,
               spec.channels, spec.height, spec.width, spec.num_classes);
  std::shared_ptr<Sequential> m = name == "fmnist-cnn" ? models::fmnist_cnn(spec)
                                  : name == "mlp"      ? models::mlp(spec)
                                                       : models::resnet(name, spec);
  m->init_parameters(seed);
  fuse_batch_norm_relu(*m);
  m->set_needs_input_grad(false);  // the input is data
  m->parameters();                 // full names on every Parameter (containers name them locally first)
  return m;
}

ModulePtr make_model(const std::string& name, uint64_t seed) { return make_model(name, ModelSpec{}, seed); }

}  // namespace tandem::nn
