// --place: modules on chosen devices train like the whole model on one device (the same
// kernels in the same order; only the boundary copies are added), and a prefix that names no
// module is an error naming the model's modules.
#include <gtest/gtest.h>

#include <cmath>

#include "dist/dist_test_util.h"
#include "tandem/data/synthetic_dataset.h"
#include "tandem/error.h"
#include "tandem/virt.h"
#include "train/run_builder.h"
#include "train/step_loop.h"

namespace tandem::testing {
namespace {

std::string error_of(const train::TrainConfig& c) {
  try {
    train::Trainer t(c, dist_train_set(), dist_test_set());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Trains `one` on one device and again with --device `device` --place `place`: the same
// weights within 1e-6 of the largest, the same test accuracy.
void expect_trains_like_one_device(const train::TrainConfig& one, const std::string& device, const std::string& place,
                                   const std::string& placement, int64_t train_samples = 320) {
  auto train_set = [&] { return std::make_shared<data::SyntheticDataset>(train_samples, 11); };
  set_virt_device_count(2);
  train::Trainer single(one, train_set(), dist_test_set(32));
  const train::TrainResult r1 = single.fit();
  train::TrainConfig placed = one;
  placed.device = device;
  placed.place = place;
  train::Trainer t(placed, train_set(), dist_test_set(32));
  EXPECT_NE(t.describe().find("placement: modules " + placement), std::string::npos) << t.describe();
  const train::TrainResult r2 = t.fit();
  const auto a = trained_weights(single), b = trained_weights(t);
  ASSERT_EQ(a.size(), b.size());
  double worst = 0, largest = 0;
  for (size_t k = 0; k < a.size(); ++k)
    for (size_t i = 0; i < a[k].size(); ++i) {
      largest = std::max(largest, std::fabs(static_cast<double>(a[k][i])));
      worst = std::max(worst, std::fabs(static_cast<double>(a[k][i]) - b[k][i]));
    }
  EXPECT_LT(worst, 1e-6 * largest);
  EXPECT_GT(largest, 0);
  EXPECT_DOUBLE_EQ(r1.epochs[0].test_accuracy, r2.epochs[0].test_accuracy);
  EXPECT_NEAR(r1.epochs[0].train_loss, r2.epochs[0].train_loss, 1e-6);
}

class Place : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

// mlp: 0 Flatten, 1 Linear(784, 256), 2 ReLU, 3 Linear(256, 10); 20 steps of Adam.
TEST_P(Place, TrainsLikeOneDevice) {
  expect_trains_like_one_device(dist_config("adam"), GetParam().first, GetParam().second, "");
}

// resnet18-cifar, a Sequential of named modules (conv1, bn1, relu, layer1..layer4, avgpool,
// flatten, fc) whose layers are Sequentials of residual blocks: placed by top-level names, and
// cut inside layer3 (its blocks join the chain), 3 steps of batch 16 from virt:0.
TEST(PlaceResNet, ByModuleNamesAndInsideANestedSequential) {
  train::TrainConfig one = dist_config("sgd");
  one.model = "resnet18-cifar";
  one.device = "virt:0";
  one.eval_batch_size = 32;
  expect_trains_like_one_device(one, "virt:0", "layer4=virt:1,fc=virt:1",
                                "conv1..layer3 on virt:0, layer4..fc on virt:1", 48);
  expect_trains_like_one_device(one, "virt:0", "layer3.1=virt:1",
                                "conv1..layer3.0 on virt:0, layer3.1..fc on virt:1", 48);
  expect_trains_like_one_device(one, "virt:0", "layer3=virt:1,layer3.1=virt:0",
                                "conv1..layer2 on virt:0, layer3.0..layer3.0 on virt:1, layer3.1..fc on virt:0", 48);
}

TEST(PlaceResNet, APrefixInsideAResidualBlockIsAnError) {
  train::TrainConfig c = dist_config("sgd");
  c.model = "resnet18-cifar";
  c.place = "layer4.1.conv1=cpu";
  const std::string e = error_of(c);
  EXPECT_NE(e.find("prefix 'layer4.1.conv1' lies inside 'layer4.1', whose forward is not a chain"), std::string::npos)
      << e;
  // A layer listed beside one of its own blocks (which cuts it): the layer stands for its
  // first block, so listing that block too is a duplicate, not an unknown module.
  c.place = "layer3=cpu,layer3.0=cpu";
  EXPECT_NE(error_of(c).find("module layer3.0 is listed out of order or twice"), std::string::npos) << error_of(c);
  c.place = "layer3.1=cpu,layer3=cpu";
  EXPECT_NE(error_of(c).find("module layer3 is listed out of order or twice"), std::string::npos) << error_of(c);
  c.place = "head=cpu";
  EXPECT_NE(error_of(c).find("expected one of the model's modules conv1, bn1, relu, layer1"), std::string::npos)
      << error_of(c);
}

INSTANTIATE_TEST_SUITE_P(Devices, Place,
                         ::testing::Values(std::make_pair("virt:0", "3=virt:1"), std::make_pair("virt:0", "0=cpu,3=virt:1"),
                                           std::make_pair("cpu", "1=virt:1,3=cpu")));

TEST(PlaceFlags, ErrorsNameTheModule) {
  train::TrainConfig c = dist_config("sgd");
  c.place = "classifier=cpu";
  EXPECT_NE(error_of(c).find("unknown module prefix 'classifier'; expected one of the model's modules 0..3"),
            std::string::npos)
      << error_of(c);
  c.place = "3=cpu,1=cpu";
  EXPECT_NE(error_of(c).find("out of order or twice"), std::string::npos);
  c.place = "3";
  EXPECT_NE(error_of(c).find("expected PREFIX=DEVICE"), std::string::npos);
  c.place = "3=gpu";
  EXPECT_NE(error_of(c).find("--place 3=gpu"), std::string::npos);
}

// Clipping and the loss scaler's inf check run over the gradients of every device, copied to
// the run's device in the parameters' order: the one-device run's norm, flag and weights, bit
// for bit, with clipping that bites (a small --clip-grad-norm) and with fp16's dynamic scaler
// started at 2^24, so that the first steps overflow and are skipped.
TEST(PlaceFlags, ClippingAndLossScalingGiveTheOneDeviceBits) {
  set_virt_device_count(2);
  const auto run = [](train::TrainConfig c, const std::string& place, int64_t* skipped) {
    c.device = "virt:0";
    c.place = place;
    std::unique_ptr<train::Run> r =
        train::build_run(c, std::make_shared<data::SyntheticDataset>(160, 11), dist_test_set(32));
    if (r->scaler) r->scaler->load({16777216.0f, 0, 0});
    int64_t global_step = 0;
    train::train_epoch(*r, 1, global_step, train::TrainCallbacks{});
    *skipped = r->scaler ? r->scaler->read().skipped_steps : 0;
    std::vector<std::vector<float>> out;
    for (const nn::NamedTensor& nt : r->model->host_state_dict())
      if (nt.tensor.dtype() == DType::f32) out.emplace_back(nt.tensor.data<float>(), nt.tensor.data<float>() + nt.tensor.numel());
    return out;
  };
  train::TrainConfig clip = dist_config("adam");
  clip.clip_grad_norm = 0.05;
  train::TrainConfig fp16 = dist_config("sgd");
  fp16.precision = "fp16";
  fp16.clip_grad_norm = 0.5;
  for (const train::TrainConfig& c : {clip, fp16}) {
    int64_t skipped_one = 0, skipped_placed = 0;
    const auto one = run(c, "", &skipped_one);
    if (c.precision == "fp16") {
      EXPECT_GT(skipped_one, 0);  // overflow steps were skipped
    }
    for (const std::string place : {"3=virt:1", "0=cpu,3=virt:1"}) {
      EXPECT_TRUE(one == run(c, place, &skipped_placed)) << c.precision << " " << place;
      EXPECT_EQ(skipped_one, skipped_placed) << c.precision << " " << place;
    }
  }
}

}  // namespace
}  // namespace tandem::testing
