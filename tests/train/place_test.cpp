// --place: modules on chosen devices train like the whole model on one device (the same
// kernels in the same order; only the boundary copies are added), and a prefix that names no
// module is an error naming the model's modules.
#include <gtest/gtest.h>

#include <cmath>

#include "dist/dist_test_util.h"
#include "tandem/error.h"
#include "tandem/virt.h"

namespace tandem::testing {
namespace {

class Place : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

// mlp: 0 Flatten, 1 Linear(784, 256), 2 ReLU, 3 Linear(256, 10); 20 steps of SGD.
TEST_P(Place, TrainsLikeOneDevice) {
  set_virt_device_count(2);
  train::TrainConfig one = dist_config("adam");
  train::Trainer single(one, dist_train_set(), dist_test_set());
  const train::TrainResult r1 = single.fit();
  train::TrainConfig placed = one;
  placed.device = GetParam().first;
  placed.place = GetParam().second;
  train::Trainer t(placed, dist_train_set(), dist_test_set());
  EXPECT_NE(t.describe().find("placement: modules"), std::string::npos) << t.describe();
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

INSTANTIATE_TEST_SUITE_P(Devices, Place,
                         ::testing::Values(std::make_pair("virt:0", "3=virt:1"), std::make_pair("virt:0", "0=cpu,3=virt:1"),
                                           std::make_pair("cpu", "1=virt:1,3=cpu")));

std::string error_of(const train::TrainConfig& c) {
  try {
    train::Trainer t(c, dist_train_set(), dist_test_set());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

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

}  // namespace
}  // namespace tandem::testing
