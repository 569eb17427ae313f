// What an offloaded optimizer says of itself through its own interface (OffloadLayout: buckets,
// delay, bytes per step, host bytes) and the host work a checkpoint finishes first: the
// update thread waited for, the pending delayed upload and the master copy the state carries.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/virt_test_util.h"
#include "optim/three_params.h"
#include "tandem/device_traits.h"
#include "tandem/optim/offload.h"
#include "tandem/optim/optimizer.h"

namespace tandem::optim {
namespace {

using tandem::testing::state_names;
using tandem::testing::ThreeParams;
using tandem::testing::to_host;

constexpr Device kVirt{DeviceKind::virt, 0};

// Through OffloadOptimizer's own interface: the layout of an offloaded adam with one bucket per
// parameter and delay 1, and the checkpoint's sequence (finish the host update, the upload
// stays pending, the state carries the master copy). (An optimizer beside the parameters has
// none of this: its home waits for nothing, tests/train/param_home_test.cpp.)
TEST(OffloadLayout, SaysItsBucketsBytesAndPendingUpload) {
  ThreeParams ps(kVirt);
  OffloadOptions off;
  off.delay = 1;
  off.bucket_cap_mb = 1000.0 / (1 << 20);  // 1000 bytes: every parameter alone
  auto opt = std::make_unique<OffloadOptimizer>("adam", ps.pointers(), OptimizerOptions{}, off);
  const OffloadLayout l = opt->layout();
  EXPECT_FALSE(l.sharded);
  EXPECT_EQ(l.buckets, 3);
  EXPECT_EQ(l.delay, 1);
  EXPECT_EQ(l.transfer_dtype, DType::f32);
  // f32 gradients down and f32 parameters up: (1025 + 63 + 300) x 4 bytes each way.
  EXPECT_EQ(l.per_step.to_host, 5552u);
  EXPECT_EQ(l.per_step.to_device, 5552u);
  EXPECT_EQ(l.host_bytes, opt->host_bytes());
  EXPECT_GE(l.host_bytes, 5u * 5552u);  // master, two gradient buffers, two moments (64-byte ranges)

  const std::vector<float> device_before = to_host(ps.all[2].value).to_vector();
  opt->step();
  opt->finish_host_updates();
  EXPECT_TRUE(opt->upload_pending());
  EXPECT_EQ(to_host(ps.all[2].value).to_vector(), device_before);  // still one update behind
  const std::vector<std::string> n = state_names(opt->state());
  EXPECT_NE(std::find(n.begin(), n.end(), "p2.master"), n.end());
  opt->flush();
  EXPECT_FALSE(opt->upload_pending());
  EXPECT_NE(to_host(ps.all[2].value).to_vector(), device_before);  // the update arrived
}

}  // namespace
}  // namespace tandem::optim
