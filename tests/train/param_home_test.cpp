// What the step loop and the checkpoints ask a parameter home (train/home/param_home.h) without
// knowing which one it is: the resident home of an optimizer beside the parameters has no host
// work to wait for, no pending upload, and checkpoints its optimizer's state() itself; the
// host-master home of an offloaded optimizer with a one-step delay waits for its update
// thread, keeps the upload pending through a checkpoint (whose state carries the master
// copy) and applies it at flush().
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
#include "train/home/homes.h"

namespace tandem::train {
namespace {

using tandem::testing::state_names;
using tandem::testing::ThreeParams;
using tandem::testing::to_host;

constexpr Device kVirt{DeviceKind::virt, 0};

TEST(ParamHome, BesideTheParametersThereIsNothingToWaitFor) {
  ThreeParams ps(Device{});
  ParamHomePtr home = make_resident_home(optim::make_optimizer("adamw", ps.pointers()), nullptr);
  EXPECT_EQ(home->host_update_flag(), nullptr);  // no host update thread
  EXPECT_FALSE(home->updates_in_backward());
  EXPECT_FALSE(home->weights_sharded());
  home->update();
  EXPECT_EQ(home->optimizer().step_count(), 1);
  EXPECT_FALSE(home->upload_pending());
  const std::vector<float> before = ps.all[0].value.to_vector();
  home->wait_host_updates();
  home->flush();
  EXPECT_EQ(ps.all[0].value.to_vector(), before);  // neither changes a parameter
  // A checkpoint's state is the optimizer's state(): the same names, the same storage, not
  // gathered from other ranks.
  home->gather_for_checkpoint(host_stream());
  const HomeCheckpoint c = home->checkpoint_state();
  const std::vector<nn::NamedTensor> state = home->optimizer().state();
  EXPECT_FALSE(c.gathered);
  EXPECT_TRUE(c.pending.empty());
  EXPECT_EQ(state_names(c.optimizer_state), state_names(state));
  ASSERT_EQ(c.optimizer_state.size(), 9u);  // exp_avg, exp_avg_sq, step for each of three
  for (size_t i = 0; i < state.size(); ++i)
    EXPECT_EQ(c.optimizer_state[i].tensor.raw_data(), state[i].tensor.raw_data());
}

// The checkpoint's sequence through the home of an offloaded adam with delay 1: the host
// update finished, the upload still pending, the state carrying the master copy; flush()
// then brings the update to the device.
TEST(ParamHome, HostMasterKeepsTheDelayedUploadPendingThroughACheckpoint) {
  ThreeParams ps(kVirt);
  optim::OffloadOptions off;
  off.delay = 1;
  ParamHomePtr home =
      make_host_master_home(std::make_unique<optim::OffloadOptimizer>("adam", ps.pointers(),
                                                                      optim::OptimizerOptions{}, off),
                            nullptr);
  EXPECT_STREQ(home->host_update_flag(), "--optimizer-device");
  EXPECT_FALSE(home->upload_pending());
  const std::vector<float> device_before = to_host(ps.all[2].value).to_vector();
  home->update();
  home->wait_host_updates();
  EXPECT_TRUE(home->upload_pending());
  EXPECT_EQ(to_host(ps.all[2].value).to_vector(), device_before);  // still one update behind
  home->gather_for_checkpoint(host_stream());
  const HomeCheckpoint c = home->checkpoint_state();
  EXPECT_FALSE(c.gathered);
  EXPECT_TRUE(home->upload_pending());  // a checkpoint leaves it pending
  const std::vector<std::string> n = state_names(c.optimizer_state);
  EXPECT_NE(std::find(n.begin(), n.end(), "p2.master"), n.end());
  home->flush();
  EXPECT_FALSE(home->upload_pending());
  EXPECT_NE(to_host(ps.all[2].value).to_vector(), device_before);  // the update arrived
}

}  // namespace
}  // namespace tandem::train
