#include "tandem/nn/models.h"

#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/conv2d.h"
#include "tandem/nn/flatten.h"
#include "tandem/nn/linear.h"
#include "tandem/nn/max_pool2d.h"
#include "tandem/nn/relu.h"
#include "tandem/nn/sequential.h"

namespace tandem::nn {

std::vector<std::string> model_names() { return {"fmnist-cnn", "mlp"}; }

ModulePtr make_model(const std::string& name, uint64_t seed) {
  std::shared_ptr<Sequential> m;
  if (name == "fmnist-cnn") {
    m = std::make_shared<Sequential>(std::vector<ModulePtr>{
        std::make_shared<Conv2d>(1, 32, 3, 1, 1), std::make_shared<BatchNorm2d>(32), std::make_shared<ReLU>(),
        std::make_shared<MaxPool2d>(2), std::make_shared<Conv2d>(32, 64, 3, 1, 1), std::make_shared<BatchNorm2d>(64),
        std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2), std::make_shared<Flatten>(),
        std::make_shared<Linear>(64 * 7 * 7, 128), std::make_shared<ReLU>(), std::make_shared<Linear>(128, 10)});
  } else if (name == "mlp") {
    m = std::make_shared<Sequential>(std::vector<ModulePtr>{std::make_shared<Flatten>(), std::make_shared<Linear>(784, 256),
                                                            std::make_shared<ReLU>(), std::make_shared<Linear>(256, 10)});
  } else {
    throw_error(ErrorCode::invalid_argument, "model",
                fmt::format("unknown model '{}' (expected fmnist-cnn or mlp)", name));
  }
  m->init_parameters(seed);
  m->set_needs_input_grad(false);  // the input is data
  return m;
}

}  // namespace tandem::nn
