// The two small models: fmnist-cnn and mlp (see tandem/nn/models.h).
#include "nn/models/families.h"
#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/conv2d.h"
#include "tandem/nn/flatten.h"
#include "tandem/nn/linear.h"
#include "tandem/nn/max_pool2d.h"
#include "tandem/nn/relu.h"

namespace tandem::nn::models {

namespace {

// fmnist-cnn halves H and W twice (MaxPool2d(2), floor): 4x4 is the least that leaves 1x1.
constexpr int64_t kCnnMinSide = 4;

}  // namespace

int64_t checked_product(const std::string& name, const ModelSpec& s, int64_t a, int64_t b, int64_t c) {
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

}  // namespace tandem::nn::models
