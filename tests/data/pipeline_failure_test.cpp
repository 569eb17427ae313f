// A failure in any stage of the input pipeline (Loader + DevicePrefetcher on virt, workers
// busy, copies in flight) reaches the consumer as an Error naming the stage's cause, and the
// pipeline then shuts down (begin_epoch() or destruction) without hanging: a corrupt sample,
// a transform that throws, a device buffer the device cannot hold (the copy's destination),
// a failing op on the compute stream, and a consumer that leaves mid-epoch after the workers
// were changed. After a failure, a new epoch runs complete.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/virt_test_util.h"
#include "data/synthetic_datasets.h"
#include "tandem/data/loader.h"
#include "tandem/data/prefetcher.h"
#include "tandem/error.h"
#include "tandem/pinned.h"
#include "tandem/virt.h"

using namespace tandem;
using namespace tandem::data;
using namespace tandem::testing;
using namespace std::chrono_literals;

namespace {

constexpr ImageDims kDims{1, 8, 8};

Device virt8(const std::string& options) {
  configure_virt(DeviceSpec::parse("virt:8?" + options));
  return Device{DeviceKind::virt, 8};
}

LoaderOptions opts(int num_workers) {
  LoaderOptions o;
  o.batch_size = 4;
  o.num_workers = num_workers;
  o.prefetch_factor = 4;
  o.allocator = &pinned_allocator();
  return o;
}

// Pixel transform that throws for one sample index.
class ThrowingTransform final : public Transform {
 public:
  explicit ThrowingTransform(int64_t bad) : bad_(bad) {}
  ImageDims output_dims(const ImageDims& in) const override { return in; }
  void apply(const uint8_t* in, const ImageDims& d, float* out, const SampleKey& key) const override {
    if (key.index == bad_) throw_error(ErrorCode::invalid_argument, "test-transform", "cannot crop");
    for (int64_t i = 0; i < d.numel(); ++i) out[i] = in[i];
  }

 private:
  int64_t bad_;
};

// Reads batches until the prefetcher throws; returns the message ("" when none threw).
std::string read_until_error(DevicePrefetcher& pf) {
  DeviceBatch b;
  try {
    while (pf.next(b)) {
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

int64_t count_epoch(DevicePrefetcher& pf, uint64_t epoch) {
  pf.begin_epoch(epoch);
  DeviceBatch b;
  int64_t n = 0;
  while (pf.next(b)) n += b.size();
  return n;
}

}  // namespace

TEST(PipelineFailure, CorruptSampleStopsTheEpochAndTheNextOneRuns) {
  const Device dev = virt8("latency_us=300&memory_mb=64&speed=1");
  auto set = std::make_shared<ThrowingDataset>(200, kDims, 77);
  for (int workers : {0, 3}) {
    Loader loader(set, nullptr, opts(workers));
    DevicePrefetcher pf(loader, dev);
    pf.begin_epoch(0);
    const std::string msg = read_until_error(pf);
    EXPECT_NE(msg.find("sample 77"), std::string::npos) << msg;
    EXPECT_NE(msg.find("corrupt record"), std::string::npos) << msg;
    // The sampler is sequential: a new epoch fails at the same sample, after 19 whole batches.
    pf.begin_epoch(1);
    EXPECT_NE(read_until_error(pf).find("sample 77"), std::string::npos);
  }  // destroyed after a failure, copies in flight
}

TEST(PipelineFailure, TransformErrorNamesTheSample) {
  const Device dev = virt8("latency_us=300&memory_mb=64&speed=1");
  auto set = std::make_shared<IndexedDataset>(200, kDims);
  Loader loader(set, std::make_shared<ThrowingTransform>(130), opts(2));
  DevicePrefetcher pf(loader, dev);
  pf.begin_epoch(0);
  const std::string msg = read_until_error(pf);
  EXPECT_NE(msg.find("sample 130"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[test-transform] cannot crop"), std::string::npos) << msg;
}

TEST(PipelineFailure, DeviceThatCannotHoldTheBatchFailsTheCopyAndShutsDown) {
  // 1 MiB of device memory; a batch of 4096 x 1x16x16 f32 images needs 4 MiB.
  const Device dev = virt8("memory_mb=1&latency_us=0&speed=1");
  auto set = std::make_shared<IndexedDataset>(8192, ImageDims{1, 16, 16});
  LoaderOptions o = opts(2);
  o.batch_size = 4096;
  o.prefetch_factor = 1;
  Loader loader(set, nullptr, o);
  {
    DevicePrefetcher pf(loader, dev);
    pf.begin_epoch(0);
    DeviceBatch b;
    try {
      pf.next(b);
      FAIL() << "expected out_of_memory";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::out_of_memory) << e.what();
    }
    EXPECT_THROW(pf.next(b), Error);  // still failing, not hanging, not asserting
  }
  configure_virt(DeviceSpec::parse("virt:8?memory_mb=64"));
  DevicePrefetcher pf(loader, dev);  // the loader serves a new prefetcher
  EXPECT_EQ(count_epoch(pf, 1), 8192);
}

TEST(PipelineFailure, FailingDeviceOpSurfacesAtSynchronizeAndShutsDown) {
  const Device dev = virt8("latency_us=300&memory_mb=64&speed=1");
  auto set = std::make_shared<SleepyDataset>(200, kDims, 100us);
  Loader loader(set, nullptr, opts(3));
  DevicePrefetcher pf(loader, dev);
  pf.begin_epoch(0);
  DeviceBatch b;
  ASSERT_TRUE(pf.next(b));
  pf.compute_stream().enqueue([] { throw_error(ErrorCode::internal, "test-op", "kernel failed"); });
  ASSERT_TRUE(pf.next(b));  // the host is not blocked by the failure
  try {
    pf.compute_stream().synchronize();
    FAIL() << "expected the op's error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[test-op] kernel failed"), std::string::npos);
  }
  // Leaving the epoch and starting another works; the stream keeps running.
  EXPECT_EQ(count_epoch(pf, 1), 200);
}

TEST(PipelineFailure, ConsumerLeavingAfterAWorkerChangeDoesNotHang) {
  const Device dev = virt8("latency_us=2000&memory_mb=64&speed=1");
  auto set = std::make_shared<SleepyDataset>(400, kDims, 300us);
  for (int leave_after : {1, 5}) {
    Loader loader(set, nullptr, opts(4));
    DevicePrefetcher pf(loader, dev);
    pf.begin_epoch(0);
    DeviceBatch b;
    for (int i = 0; i < leave_after; ++i) ASSERT_TRUE(pf.next(b));
    loader.set_num_workers(1);  // three workers are mid-batch
    pf.set_prefetch_depth(4);
    ASSERT_TRUE(pf.next(b));
  }  // destroyed: copies pending, workers busy, surplus workers leaving
}
