// Virt memory and copies: device memory is reachable only through copies, copies complete
// later on the stream's thread, reads of a pending destination are refused, throttling holds
// its lower bounds, configuration is validated.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tandem/error.h"
#include "tandem/tensor.h"
#include "tandem/virt.h"
#include "virt_test_util.h"

using namespace tandem;
using tandem::testing::Gate;
using Clock = std::chrono::steady_clock;

namespace {

constexpr Device kVirt0{DeviceKind::virt, 0};
constexpr Device kVirt1{DeviceKind::virt, 1};

Runtime& virt_rt() {
  return runtime(DeviceKind::virt);
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * scale - 3.0f;
  return v;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Throttled tests use virt:1 and restore its defaults afterwards.
class VirtThrottled : public ::testing::Test {
 protected:
  void SetUp() override {
    set_virt_device_count(2);
    set_virt_throttle(1, VirtThrottle{});
  }
  void TearDown() override { set_virt_throttle(1, VirtThrottle{}); }
};

}  // namespace

TEST(VirtMemory, DeviceMemoryIsNotHostAccessible) {
  Tensor d = Tensor::empty({4, 4}, DType::f32, kVirt0);
  EXPECT_EQ(d.device(), kVirt0);
  EXPECT_FALSE(d.device().is_host());
  try {
    d.data<float>();
    FAIL() << "host access to virt memory must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("virt:0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(d.fill(1.0), Error);
  EXPECT_THROW(Tensor::zeros({2}, DType::f32, kVirt0), Error);
}

TEST(VirtMemory, RoundTripHostVirtVirtHostIsExact) {
  set_virt_device_count(2);
  Stream s0 = virt_rt().new_stream(0);
  const auto values = ramp(10007, 0.37f);
  Tensor h = Tensor::from_vector({10007}, values);
  Tensor d0 = h.to(kVirt0, s0);
  Tensor d1 = d0.to(kVirt1, s0);  // virt:0 -> virt:1, ordered on a stream of virt:0
  Tensor back = d1.to(Device{}, s0);
  back.storage()->pending_write().synchronize();
  EXPECT_EQ(back.to_vector(), values);
  EXPECT_EQ(back.device(), Device{});
}

TEST_F(VirtThrottled, CopiesReallyCompleteLater) {
  configure_virt(DeviceSpec::parse("virt:1?bw=0.05"));  // 50 MB/s: 4 MiB take >= 80 ms
  Stream s = virt_rt().new_stream(1);
  const size_t n = size_t{1} << 20;
  Tensor h = Tensor::from_vector({static_cast<int64_t>(n)}, ramp(n, 1.0f));
  Tensor d = h.to(kVirt1, s);
  Event e = s.record();
  EXPECT_FALSE(e.query());
  EXPECT_FALSE(d.storage()->pending_write().query());
  s.synchronize();
  EXPECT_TRUE(e.query());
  EXPECT_TRUE(d.storage()->pending_write().query());
}

TEST_F(VirtThrottled, ReadingADeviceToHostDestinationBeforeItsEventIsRefused) {
  Stream s = virt_rt().new_stream(1);
  const auto values = ramp(4096, 0.25f);
  Tensor d = Tensor::from_vector({4096}, values).to(kVirt1, s);
  Gate gate;
  gate.hold(s);  // the copy below cannot run before the gate opens
  Tensor h = d.to(Device{}, s);
  try {
    h.data<float>();
    FAIL() << "reading a pending device-to-host destination must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::internal);
    EXPECT_EQ(std::string(e.what()).rfind("[tensor]", 0), 0u) << e.what();
  }
  EXPECT_THROW(h.to_vector(), Error);
  EXPECT_THROW(h.item(0), Error);
  gate.open();
  h.storage()->pending_write().synchronize();
  EXPECT_EQ(h.to_vector(), values);
}

TEST_F(VirtThrottled, CopyTakesAtLeastBytesOverBandwidth) {
  const double bw = 0.2;  // GB/s
  configure_virt(DeviceSpec::parse("virt:1?bw=0.2"));
  EXPECT_DOUBLE_EQ(virt_throttle(1).bw_gbps, bw);
  Stream s = virt_rt().new_stream(1);
  const size_t n = size_t{2} << 20;  // floats: 8 MiB
  Tensor h = Tensor::from_vector({static_cast<int64_t>(n)}, ramp(n, 1.0f));
  const auto t0 = Clock::now();
  Tensor d = h.to(kVirt1, s);
  s.synchronize();
  const double lower = static_cast<double>(n * sizeof(float)) / (bw * 1e9);
  EXPECT_GE(seconds_since(t0), lower);  // lower bound only: the machine may be slower
}

TEST_F(VirtThrottled, LatencyIsPaidPerCopy) {
  configure_virt(DeviceSpec::parse("virt:1?latency_us=20000"));
  Stream s = virt_rt().new_stream(1);
  Tensor h = Tensor::from_vector({4}, {1, 2, 3, 4});
  const auto t0 = Clock::now();
  std::vector<Tensor> copies;
  for (int i = 0; i < 3; ++i) copies.push_back(h.to(kVirt1, s));
  s.synchronize();
  EXPECT_GE(seconds_since(t0), 3 * 0.020);
}

TEST_F(VirtThrottled, ComputeAtQuarterSpeedTakesFourTimesAsLong) {
  configure_virt(DeviceSpec::parse("virt:1?speed=0.25"));
  Stream s = virt_rt().new_stream(1);
  const auto t0 = Clock::now();
  s.enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  s.synchronize();
  EXPECT_GE(seconds_since(t0), 4 * 0.020);
}

TEST_F(VirtThrottled, ArenaCapacityTriggersCacheReleaseThenOutOfMemory) {
  configure_virt(DeviceSpec::parse("virt:1?memory_mb=4"));
  CachingAllocator& pool = virt_allocator(1);
  pool.empty_cache();
  const size_t base = virt_arena_stats(1).reserved_bytes;
  ASSERT_EQ(base, 0u) << "virt:1 should hold no memory between tests";
  {
    Tensor a = Tensor::empty({3 << 18}, DType::f32, kVirt1);  // 3 MiB -> one 4 MiB segment
    try {
      Tensor b = Tensor::empty({3 << 18}, DType::f32, kVirt1);
      FAIL() << "a second 3 MiB tensor does not fit into 4 MiB";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::out_of_memory);
      EXPECT_EQ(std::string(e.what()).rfind("[alloc]", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find("virt:1"), std::string::npos) << e.what();
    }
  }
  // The 4 MiB segment is now cached; a small request needs a new 2 MiB segment, so the pool
  // must give the cached one back to the arena first.
  EXPECT_EQ(pool.cached_bytes(), size_t{4} << 20);
  Tensor small = Tensor::empty({256}, DType::f32, kVirt1);
  EXPECT_EQ(virt_arena_stats(1).reserved_bytes, size_t{2} << 20);
  small = Tensor();
  pool.empty_cache();
  EXPECT_EQ(virt_arena_stats(1).reserved_bytes, 0u);
}

// A work item keeps the tensors it captured alive until it ran; when the pool cannot grow, the
// allocation waits for the device's streams (which return them) and tries once more, as a GPU
// would have reused the memory in stream order. Work that holds its tensor still fails.
TEST_F(VirtThrottled, FullArenaWaitsForQueuedWorkBeforeOutOfMemory) {
  configure_virt(DeviceSpec::parse("virt:1?memory_mb=4"));
  virt_allocator(1).empty_cache();
  ASSERT_EQ(virt_arena_stats(1).reserved_bytes, 0u) << "virt:1 should hold no memory between tests";
  Stream s = virt_rt().new_stream(1);
  std::atomic<bool> ran{false};
  {
    Tensor a = Tensor::empty({3 << 18}, DType::f32, kVirt1);  // 3 MiB: the arena's 4 MiB segment
    s.enqueue([a, &ran] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ran = a.defined();
    });
  }
  Tensor b = Tensor::empty({3 << 18}, DType::f32, kVirt1);  // fits once the item dropped `a`
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(virt_arena_stats(1).reserved_bytes, size_t{4} << 20);
  EXPECT_THROW(Tensor::empty({3 << 18}, DType::f32, kVirt1), Error);  // `b` is still held
  b = Tensor();
  virt_allocator(1).empty_cache();
}

TEST(VirtRuntime, CopiesNeedAVirtStream) {
  Tensor h = Tensor::from_vector({2}, {1, 2});
  Tensor d = Tensor::empty({2}, DType::f32, kVirt0);
  Runtime& rt = virt_rt();
  EXPECT_THROW(rt.copy_async(d.raw_data(), kVirt0, h.raw_data(), Device{}, 8,
                             runtime(DeviceKind::cpu).default_stream(0)),
               Error);
  EXPECT_THROW(rt.copy_async(d.raw_data(), kVirt0, h.raw_data(), Device{}, 8, Stream()), Error);
}

TEST(VirtRuntime, ConfigurationIsValidated) {
  EXPECT_THROW(configure_virt(DeviceSpec::parse("cpu")), Error);
  EXPECT_THROW(configure_virt(DeviceSpec::parse("virt:3?speeed=2")), Error);
  EXPECT_THROW(configure_virt(DeviceSpec::parse("virt:3?speed=0")), Error);
  EXPECT_THROW(configure_virt(DeviceSpec::parse("virt:3?bw=-1")), Error);
  EXPECT_THROW(configure_virt(DeviceSpec::parse("virt:3?bw=fast")), Error);
  EXPECT_THROW(configure_virt(DeviceSpec::parse("virt:3?latency_us=-5")), Error);
  EXPECT_THROW(configure_virt(DeviceSpec::parse("virt:99")), Error);
  EXPECT_THROW(set_virt_device_count(0), Error);
  EXPECT_THROW(set_virt_device_count(kMaxVirtDevices + 1), Error);
}

TEST(VirtRuntime, DeviceCountDefaultsToOneAndGrowsWithConfiguration) {
  set_virt_device_count(1);
  EXPECT_EQ(virt_rt().device_count(), 1);
  try {
    runtime_for(Device(DeviceKind::virt, 2));
    FAIL() << "virt:2 should not exist yet";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_available);
  }
  configure_virt(DeviceSpec::parse("virt:2?speed=0.5&bw=12&latency_us=20"));
  EXPECT_EQ(virt_rt().device_count(), 3);
  const VirtThrottle t = virt_throttle(2);
  EXPECT_DOUBLE_EQ(t.speed, 0.5);
  EXPECT_DOUBLE_EQ(t.bw_gbps, 12.0);
  EXPECT_DOUBLE_EQ(t.latency_us, 20.0);
  EXPECT_NO_THROW(runtime_for(Device(DeviceKind::virt, 2)));
  set_virt_throttle(2, VirtThrottle{});
  set_virt_device_count(2);
}

TEST(VirtMemory, DroppingBothEndsOfAQueuedCopyIsSafe) {
  Stream s = virt_rt().new_stream(0);
  const auto values = ramp(65536, 0.5f);
  Tensor d;
  {
    Gate gate;
    gate.hold(s);
    d = Tensor::from_vector({65536}, values).to(kVirt0, s);  // source is a temporary
    // Churn host memory while the copy waits: a freed source would be reused and rewritten.
    for (int i = 0; i < 8; ++i) Tensor::full({65536}, -1.0f);
    Tensor lost = d.to(Device{}, s);  // destination dropped before the copy ran
  }
  Tensor back = d.to(Device{}, s);
  s.synchronize();
  EXPECT_EQ(back.to_vector(), values);
}
