// What the training loop asks an optimizer through the Optimizer interface alone (no type
// tests): the layout (offloaded, sharded, buckets, bytes per step), the host work to finish,
// the pending delayed upload and the state a checkpoint gathers, for an optimizer beside the
// parameters and an offloaded one with a one-step delay.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/virt_test_util.h"
#include "tandem/device_traits.h"
#include "tandem/optim/offload.h"
#include "tandem/optim/optimizer.h"

namespace tandem::optim {
namespace {

using tandem::testing::on;
using tandem::testing::random_host;
using tandem::testing::to_host;

constexpr Device kVirt{DeviceKind::virt, 0};

// Three parameters of 1025, 63 and 300 elements on a device, with gradients.
struct Params {
  explicit Params(Device d) {
    const std::vector<Shape> shapes{{1025}, {7, 9}, {300}};
    const char* const names[] = {"p0", "p1", "p2"};
    for (size_t i = 0; i < 3; ++i) {
      all[i].name = names[i];
      all[i].value = on(d, random_host(shapes[i], 20 + i));
      all[i].grad = on(d, random_host(shapes[i], 40 + i));
    }
  }
  std::vector<nn::Parameter*> pointers() { return {&all[0], &all[1], &all[2]}; }
  nn::Parameter all[3];
};

std::vector<std::string> names(const std::vector<nn::NamedTensor>& state) {
  std::vector<std::string> out;
  for (const nn::NamedTensor& t : state) out.push_back(t.name);
  return out;
}

TEST(OptimizerLayout, BesideTheParametersTheDefaultsSayNothingToWaitFor) {
  Params ps(Device{});
  std::unique_ptr<Optimizer> opt = make_optimizer("adamw", ps.pointers());
  const OptimizerLayout l = opt->layout();
  EXPECT_FALSE(l.offloaded);
  EXPECT_FALSE(l.sharded);
  EXPECT_EQ(l.buckets, 0);
  EXPECT_EQ(l.per_step.to_host + l.per_step.to_device, 0u);
  opt->step();
  EXPECT_FALSE(opt->upload_pending());
  const std::vector<float> before = ps.all[0].value.to_vector();
  opt->finish_host_updates();
  opt->write_master_values();
  EXPECT_EQ(ps.all[0].value.to_vector(), before);  // neither changes a parameter
  // A checkpoint's state is state(): the same names, the same storage.
  const std::vector<nn::NamedTensor> state = opt->state(), gathered = opt->gathered_state(host_stream());
  EXPECT_EQ(names(gathered), names(state));
  ASSERT_EQ(gathered.size(), 9u);  // exp_avg, exp_avg_sq, step for each of three
  for (size_t i = 0; i < state.size(); ++i) EXPECT_EQ(gathered[i].tensor.raw_data(), state[i].tensor.raw_data());
}

// Through Optimizer& only: the layout of an offloaded adam with one bucket per parameter and
// delay 1, and the checkpoint's sequence (finish the host update, the upload stays pending,
// the state carries the master copy).
TEST(OptimizerLayout, OffloadedSaysItsBucketsBytesAndPendingUpload) {
  Params ps(kVirt);
  OffloadOptions off;
  off.delay = 1;
  off.bucket_cap_mb = 1000.0 / (1 << 20);  // 1000 bytes: every parameter alone
  auto concrete = std::make_unique<OffloadOptimizer>("adam", ps.pointers(), OptimizerOptions{}, off);
  const size_t host_bytes = concrete->host_bytes();
  std::unique_ptr<Optimizer> opt = std::move(concrete);
  const OptimizerLayout l = opt->layout();
  EXPECT_TRUE(l.offloaded);
  EXPECT_FALSE(l.sharded);
  EXPECT_EQ(l.buckets, 3);
  EXPECT_EQ(l.delay, 1);
  EXPECT_EQ(l.transfer_dtype, DType::f32);
  // f32 gradients down and f32 parameters up: (1025 + 63 + 300) x 4 bytes each way.
  EXPECT_EQ(l.per_step.to_host, 5552u);
  EXPECT_EQ(l.per_step.to_device, 5552u);
  EXPECT_EQ(l.host_bytes, host_bytes);
  EXPECT_GE(l.host_bytes, 5u * 5552u);  // master, two gradient buffers, two moments (64-byte ranges)

  const std::vector<float> device_before = to_host(ps.all[2].value).to_vector();
  opt->step();
  opt->finish_host_updates();
  EXPECT_TRUE(opt->upload_pending());
  EXPECT_EQ(to_host(ps.all[2].value).to_vector(), device_before);  // still one update behind
  const std::vector<std::string> n = names(opt->gathered_state(host_stream()));
  EXPECT_NE(std::find(n.begin(), n.end(), "p2.master"), n.end());
  opt->flush();
  EXPECT_FALSE(opt->upload_pending());
  EXPECT_NE(to_host(ps.all[2].value).to_vector(), device_before);  // the update arrived
}

}  // namespace
}  // namespace tandem::optim
