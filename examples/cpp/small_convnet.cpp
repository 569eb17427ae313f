#include "small_convnet.h"

#include <memory>

#include "tandem/nn/adaptive_avg_pool2d.h"
#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/conv2d.h"
#include "tandem/nn/flatten.h"
#include "tandem/nn/linear.h"
#include "tandem/nn/max_pool2d.h"
#include "tandem/nn/models.h"
#include "tandem/nn/relu.h"
#include "tandem/nn/sequential.h"

namespace nn = tandem::nn;

void register_small_convnet() {
  nn::register_model(kSmallConvnet, [](const nn::ModelSpec& spec) -> nn::ModulePtr {
    return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
        std::make_shared<nn::Conv2d>(spec.channels, 8, 3, 1, 1),
        std::make_shared<nn::BatchNorm2d>(8), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Conv2d>(8, 16, 3, 1, 1),
        std::make_shared<nn::BatchNorm2d>(16), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::AdaptiveAvgPool2d>(1), std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(16, spec.num_classes)});
  });
}
