// Data parallel over placed replicas: each rank places its own replica (--place), the gradient
// buckets take the gradients of every device of it, and the ranks end with the weights of the
// same data-parallel run without placement, bit for bit (the same all-reduces over the same
// values; --place alone gives the one-device bits), with clipping and gradient compression
// too. ZeRO-1 over placed replicas is refused with one line. A batch split under data parallel
// (--devices on each rank) splits each rank's share over its devices; the combined gradients
// are all-reduced: the weights of the unsplit data-parallel run up to the order of the sums.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "dist/dist_test_util.h"
#include "tandem/error.h"
#include "tandem/virt.h"

namespace tandem::testing {
namespace {

// Two ranks of `c`, rank r on virt:2r, placed by `place(r)` ("" = not placed) or split over
// virt:2r and virt:2r+1 (`split`); each rank's weights.
std::vector<std::vector<std::vector<float>>> two_ranks(const train::TrainConfig& c,
                                                       const std::function<std::string(int)>& place,
                                                       bool split = false) {
  set_virt_device_count(4);
  comm::LocalGroup group(2, 60);
  std::vector<std::vector<std::vector<float>>> out(2);
  on_ranks(2, [&](int r) {
    train::TrainConfig mine = c;
    mine.device = "virt:" + std::to_string(2 * r);
    mine.place = place(r);
    if (split) {
      mine.devices = "virt:" + std::to_string(2 * r) + ",virt:" + std::to_string(2 * r + 1);
      mine.split = "1,1";
    }
    train::Trainer t(mine, dist_train_set(), dist_test_set(), group.communicator(r));
    const train::TrainResult res = t.fit();
    EXPECT_TRUE(std::isfinite(res.epochs[0].train_loss));
    out[static_cast<size_t>(r)] = trained_weights(t);
  });
  return out;
}

TEST(PlaceDataParallel, PlacedReplicasTrainLikeUnplacedOnes) {
  train::TrainConfig adam = dist_config("adam");
  adam.batch_size = 8;
  train::TrainConfig clip = adam;
  clip.clip_grad_norm = 0.05;
  train::TrainConfig gcomp = dist_config("sgd");
  gcomp.batch_size = 8;
  gcomp.grad_compression = "bf16";
  for (const train::TrainConfig& c : {adam, clip, gcomp}) {
    const auto plain = two_ranks(c, [](int) { return std::string(); });
    const auto placed = two_ranks(c, [](int r) { return "3=virt:" + std::to_string(2 * r + 1); });
    const auto on_cpu = two_ranks(c, [](int r) { return "0=cpu,3=virt:" + std::to_string(2 * r + 1); });
    ASSERT_FALSE(plain[0].empty());
    EXPECT_TRUE(plain[0] == plain[1]);
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(plain[0] == placed[static_cast<size_t>(r)]) << c.optimizer << " clip " << c.clip_grad_norm;
      EXPECT_TRUE(plain[0] == on_cpu[static_cast<size_t>(r)]) << c.optimizer << " clip " << c.clip_grad_norm;
    }
  }
}

TEST(SplitDataParallel, EachRankSplitsItsShareLikeTheUnsplitRun) {
  train::TrainConfig sgd = dist_config("sgd");
  train::TrainConfig zero1 = dist_config("adam");
  zero1.zero = 1;
  train::TrainConfig gcomp = dist_config("sgd");
  gcomp.grad_compression = "bf16";
  gcomp.clip_grad_norm = 0.5;
  for (const train::TrainConfig& c : {sgd, zero1, gcomp}) {
    const auto none = [](int) { return std::string(); };
    const auto plain = two_ranks(c, none), split = two_ranks(c, none, true);
    ASSERT_EQ(plain[0].size(), split[0].size());
    EXPECT_TRUE(split[0] == split[1]) << "the ranks' weights differ";
    double largest = 0, worst = 0;
    for (size_t k = 0; k < plain[0].size(); ++k)
      for (size_t i = 0; i < plain[0][k].size(); ++i) {
        largest = std::max(largest, std::abs(static_cast<double>(plain[0][k][i])));
        worst = std::max(worst, std::abs(static_cast<double>(plain[0][k][i]) - split[0][k][i]));
      }
    EXPECT_GT(largest, 0);
    // bf16 compression rounds the combined gradients, whose last f32 bits the split's order of
    // sums changes: some round to the next bf16 (measured 1.2e-4 of the largest weight).
    const double tolerance = c.grad_compression == "bf16" ? 1e-3 * largest
                             : c.optimizer == "sgd"       ? 1e-5 * largest
                                                          : 0.02 * c.lr;
    EXPECT_LE(worst, tolerance) << c.optimizer << " zero " << c.zero << " " << c.grad_compression;
  }
}

TEST(PlaceDataParallel, ZeroOneIsRefused) {
  comm::LocalGroup group(2, 60);
  std::vector<std::string> errors(2);
  set_virt_device_count(2);
  on_ranks(2, [&](int r) {
    train::TrainConfig c = dist_config("adam");
    c.device = "virt:0";
    c.place = "3=virt:1";
    c.zero = 1;
    try {
      train::Trainer t(c, dist_train_set(), dist_test_set(), group.communicator(r));
    } catch (const Error& e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
  });
  for (const std::string& e : errors)
    EXPECT_NE(e.find("--place 3=virt:1 with --zero 1: not supported yet"), std::string::npos) << e;
}

}  // namespace
}  // namespace tandem::testing
