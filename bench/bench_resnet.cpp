// ResNet training throughput on the CPU, compute only, the same work as the peer
// ../shared/peers/torch_resnet.py: random input made once, forward, cross-entropy, backward,
// SGD (momentum 0.9, weight decay 5e-4), timed after 2 warm-up steps.
// Usage: bench_resnet MODEL [image_size=224] [batch_size=64] [threads=2] [steps=10] [device=cpu]
//                     [precision=fp32]
//   MODEL: resnet18 | resnet34 | resnet50 (1000 classes) | resnet18-cifar (10 classes)
//   device: cpu, or cuda[:N] / virt[:N] (the input is copied there once; scripts/gpu-check.sh)
//   precision: fp32, bf16 or fp16 (convolutions and activations in it, f32 master weights, as
//   tandem train --precision; the peer's bf16 is torch.autocast)
// Prints "MODEL size S batch B threads T PRECISION device D train_img_per_s X step_ms M".
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/models.h"
#include "tandem/ops.h"
#include "tandem/optim/optimizer.h"
#include "tandem/rng.h"
#include "tandem/stream.h"
#include "tandem/device.h"

using namespace tandem;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  try {
    if (argc > 8) throw std::invalid_argument("expected at most 7 arguments (see the usage at the top of bench_resnet.cpp)");
    // A positive integer argument, named in the error.
    auto count = [&](int i, const char* what, long long fallback) {
      if (argc <= i) return fallback;
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(argv[i], &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || argv[i][used] != '\0' || v < 1)
        throw std::invalid_argument(std::string(what) + ": expected a positive integer, got '" + argv[i] + "'");
      return v;
    };
    const std::string name = argc > 1 ? argv[1] : "resnet18";
    const int64_t size = count(2, "image_size", 224);
    const int64_t batch = count(3, "batch_size", 64);
    const int threads = static_cast<int>(count(4, "threads", 2));
    const int steps = static_cast<int>(count(5, "steps", 10));
    const std::string device_text = argc > 6 ? argv[6] : "cpu";
    const std::string precision = argc > 7 ? argv[7] : "fp32";
    if (precision != "fp32" && precision != "bf16" && precision != "fp16")
      throw std::invalid_argument("precision: expected fp32, bf16 or fp16, got " + precision);
    const DType dt = precision == "bf16" ? DType::bf16 : precision == "fp16" ? DType::f16 : DType::f32;
    const Device device = DeviceSpec::parse(device_text).device;
    ops::set_num_threads(threads);
    const int64_t classes = name == "resnet18-cifar" ? 10 : 1000;
    nn::ModulePtr model = nn::make_model(name, {3, size, size, classes}, 0);
    if (!device.is_host()) model->to(device);
    if (dt != DType::f32) model->set_compute_dtype(dt);
    optim::OptimizerOptions oo;
    oo.lr = 0.1;
    oo.momentum = 0.9;
    oo.weight_decay = 5e-4;
    auto opt = optim::make_optimizer("sgd", model->parameters(), oo);
    nn::CrossEntropyLoss loss_fn;
    Tensor x = Tensor::empty({batch, 3, size, size});
    Tensor y = Tensor::empty({batch}, DType::i64);
    Philox rng(1, 0);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 2.0f * rng.uniform() - 1.0f;
    for (int64_t i = 0; i < batch; ++i) y.data<int64_t>()[i] = rng.randint(static_cast<uint32_t>(classes));
    if (dt != DType::f32) x = x.to(dt);
    if (!device.is_host()) {
      const Stream s = runtime_for(device).default_stream(device.index);
      x = x.to(device, s);
      y = y.to(device, s);
      s.synchronize();
    }
    auto sync = [&] {
      if (!device.is_host()) runtime_for(device).default_stream(device.index).synchronize();
    };
    auto step = [&] {
      opt->zero_grad();
      loss_fn.forward(model->forward(x), y);
      model->backward(loss_fn.backward());
      opt->step();
    };
    for (int i = 0; i < 2; ++i) step();
    sync();
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) step();
    sync();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("%s size %lld batch %lld threads %d %s device %s train_img_per_s %.1f step_ms %.1f\n",
                name.c_str(), static_cast<long long>(size), static_cast<long long>(batch), threads,
                precision.c_str(), device_text.c_str(), steps * batch / s, 1000.0 * s / steps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_resnet: %s\n", e.what());
    return 1;
  }
  return 0;
}
