// Runtime::current_stream: the stream the calling thread's ops run on, asked without knowing
// the device kind. cpu and an unguarded virt device answer their default stream; a
// VirtStreamGuard changes the answer on its own thread only, and restores it when it ends;
// an op issued through runtime_for(device).current_stream() lands on the guarded stream.
#include <gtest/gtest.h>

#include <thread>

#include "tandem/ops.h"
#include "tandem/stream.h"
#include "tandem/virt.h"
#include "virt_test_util.h"

namespace tandem {
namespace {

constexpr Device kVirt{DeviceKind::virt, 0};

TEST(CurrentStream, CpuIsTheInlineDefaultStream) {
  Runtime& rt = runtime_for(Device{});
  EXPECT_EQ(rt.current_stream(0).impl(), rt.default_stream(0).impl());
  int ran = 0;
  rt.current_stream(0).enqueue([&] { ++ran; });
  EXPECT_EQ(ran, 1);  // inline: done before enqueue returns
}

TEST(CurrentStream, VirtFollowsTheGuardOfTheCallingThreadOnly) {
  Runtime& rt = runtime_for(kVirt);
  const Stream def = rt.default_stream(0);
  EXPECT_EQ(rt.current_stream(0).impl(), def.impl());
  const Stream side = rt.new_stream(0);
  {
    VirtStreamGuard guard(side);
    EXPECT_EQ(rt.current_stream(0).impl(), side.impl());
    StreamImpl* other_thread = nullptr;
    std::thread([&] { other_thread = rt.current_stream(0).impl(); }).join();
    EXPECT_EQ(other_thread, def.impl());

    // An op issued now runs on `side`: held back by a gate there, its output is not written.
    testing::Gate gate;
    gate.hold(side);
    Tensor host = Tensor::full({8}, 1.0f);
    Tensor t = host.to(kVirt, rt.current_stream(0));
    ops::scale_(t, 3.0f);
    EXPECT_FALSE(t.storage()->pending_write().query());
    gate.open();
    side.synchronize();
    EXPECT_EQ(testing::to_host(t).item(7), 3.0);
  }
  EXPECT_EQ(rt.current_stream(0).impl(), def.impl());
}

}  // namespace
}  // namespace tandem
