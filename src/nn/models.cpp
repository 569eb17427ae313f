#include "tandem/nn/models.h"

#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/conv2d.h"
#include "tandem/nn/flatten.h"
#include "tandem/nn/linear.h"
#include "tandem/nn/max_pool2d.h"
#include "tandem/nn/relu.h"
#include "tandem/nn/sequential.h"

namespace tandem::nn {

namespace {

// fmnist-cnn halves H and W twice (MaxPool2d(2), floor): 4x4 is the least that leaves 1x1.
constexpr int64_t kCnnMinSide = 4;

// a * b * c, refusing a product past 2^63 - 1 (a wrapped one would size a layer wrongly).
int64_t checked_product(const std::string& name, const ModelSpec& s, int64_t a, int64_t b,
                        int64_t c) {
  int64_t ab = 0, abc = 0;
  TD_CHECK_ARG(!__builtin_mul_overflow(a, b, &ab) && !__builtin_mul_overflow(ab, c, &abc), "model",
               "{}: sample shape {}x{}x{} has more than 2^63 - 1 elements", name, s.channels,
               s.height, s.width);
  return abc;
}

std::shared_ptr<Sequential> fmnist_cnn(const ModelSpec& s) {
  TD_CHECK_ARG(s.height >= kCnnMinSide && s.width >= kCnnMinSide, "model",
               "fmnist-cnn needs images of at least {}x{} (two 2x2 max-pools), found {}x{}", kCnnMinSide,
               kCnnMinSide, s.height, s.width);
  checked_product("fmnist-cnn", s, s.channels, s.height, s.width);
  // after conv (same size), pool, conv, pool
  const int64_t flat = checked_product("fmnist-cnn", s, 64, s.height / 2 / 2, s.width / 2 / 2);
  return std::make_shared<Sequential>(std::vector<ModulePtr>{
      std::make_shared<Conv2d>(s.channels, 32, 3, 1, 1), std::make_shared<BatchNorm2d>(32), std::make_shared<ReLU>(),
      std::make_shared<MaxPool2d>(2), std::make_shared<Conv2d>(32, 64, 3, 1, 1), std::make_shared<BatchNorm2d>(64),
      std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2), std::make_shared<Flatten>(),
      std::make_shared<Linear>(flat, 128), std::make_shared<ReLU>(), std::make_shared<Linear>(128, s.num_classes)});
}

std::shared_ptr<Sequential> mlp(const ModelSpec& s) {
  return std::make_shared<Sequential>(std::vector<ModulePtr>{
      std::make_shared<Flatten>(),
      std::make_shared<Linear>(checked_product("mlp", s, s.channels, s.height, s.width), 256),
      std::make_shared<ReLU>(), std::make_shared<Linear>(256, s.num_classes)});
}

}  // namespace

std::vector<std::string> model_names() { return {"fmnist-cnn", "mlp"}; }

void check_model_name(const std::string& name) {
  if (name != "fmnist-cnn" && name != "mlp")
    throw_error(ErrorCode::invalid_argument, "model",
                fmt::format("unknown model '{}' (expected fmnist-cnn or mlp)", name));
}

ModulePtr make_model(const std::string& name, const ModelSpec& spec, uint64_t seed) {
  check_model_name(name);
  TD_CHECK_ARG(spec.channels >= 1 && spec.height >= 1 && spec.width >= 1 && spec.num_classes >= 1, "model",
               "{}: expected a sample shape and a class count of at least 1, found {}x{}x{} and {} classes", name,
               spec.channels, spec.height, spec.width, spec.num_classes);
  std::shared_ptr<Sequential> m = name == "fmnist-cnn" ? fmnist_cnn(spec) : mlp(spec);
  m->init_parameters(seed);
  m->set_needs_input_grad(false);  // the input is data
  return m;
}

ModulePtr make_model(const std::string& name, uint64_t seed) { return make_model(name, ModelSpec{}, seed); }

}  // namespace tandem::nn
