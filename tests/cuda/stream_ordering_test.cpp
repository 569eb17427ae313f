// Stream order outside the prefetcher, on virt (runs everywhere) and on cuda (skipped without
// a GPU), written once against the generic API: an op waits for a copy still running on
// another stream, work on another stream follows an op through the pending write of its
// output, Tensor::to on another stream does not overwrite a block the default stream still
// uses, and dropping both ends of a queued copy is safe. Buffers the host reads while a stream
// is held are page-locked, and every allocation is made before a stream is held back (a
// pageable copy or a cudaHostAlloc may wait for the device, which would wait for the gate).
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "core/virt_test_util.h"
#include "cuda/cuda_test_util.h"
#include "tandem/caching_allocator.h"
#include "tandem/ops.h"
#include "tandem/pinned.h"

namespace tandem {
namespace {

using testing::Gate;

class StreamOrdering : public ::testing::TestWithParam<DeviceKind> {
 protected:
  void SetUp() override {
    if (GetParam() == DeviceKind::cuda) TD_REQUIRE_CUDA();
  }
  Device dev() const { return Device(GetParam(), 0); }
  Runtime& rt() const { return runtime_for(dev()); }
  Stream op_stream() const { return rt().current_stream(0); }

  // A page-locked host tensor [n] with values f(i).
  template <typename F>
  static Tensor pinned_values(int64_t n, F f) {
    Tensor t = pinned_empty({n});
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = f(i);
    return t;
  }

  // Copies `t` into the pinned `h` on `s`, after t's pending write; h's pending write is the
  // copy's event.
  void download(const Tensor& t, Tensor& h, const Stream& s) const {
    if (!t.storage()->pending_write().query()) s.wait(t.storage()->pending_write());
    rt().copy_async(h.raw_data(), Device{}, t.raw_data(), t.device(), t.nbytes(), s);
    h.storage()->set_pending_write(s.record());
  }

  // Returns the device pool's cached segments, so that a freed block is the only one to reuse.
  void empty_pool() const {
    op_stream().synchronize();
    if (auto* pool = dynamic_cast<CachingAllocator*>(&rt().allocator(0))) pool->empty_cache();
  }
};

TEST_P(StreamOrdering, OpWaitsForACopyOnAnotherStream) {
  const int64_t n = 4099;
  Stream producer = rt().new_stream(0);
  Tensor src = pinned_values(n, [](int64_t i) { return static_cast<float>(i % 7) - 3.0f; });
  Tensor stale = pinned_values(n, [](int64_t) { return 100.0f; });
  Tensor out = pinned_empty({n});
  Tensor y = Tensor::empty({n}, DType::f32, dev());
  { Tensor warm = stale.to(dev(), op_stream()); op_stream().synchronize(); }  // x reuses it
  Gate gate;
  gate.hold(producer);
  Tensor x = src.to(dev(), producer);  // held back by the gate
  ops::relu_forward(x, y);             // on the op stream: must wait for the copy
  download(y, out, op_stream());
  EXPECT_FALSE(out.storage()->pending_write().query()) << "the op ran before the copy it reads";
  gate.open();
  out.storage()->pending_write().synchronize();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(out.data<float>()[i], std::max(0.0f, src.data<float>()[i])) << "element " << i;
}

TEST_P(StreamOrdering, WorkOnAnotherStreamFollowsAnOpThroughItsOutput) {
  const int64_t n = 3001;
  Stream consumer = rt().new_stream(0);
  Tensor src = pinned_values(n, [](int64_t i) { return static_cast<float>(i); });
  Tensor out = pinned_empty({n});
  Tensor x = src.to(dev(), op_stream());
  op_stream().synchronize();
  Gate gate;
  gate.hold(op_stream());
  ops::scale_(x, 10.0f);  // held back by the gate
  EXPECT_FALSE(x.storage()->pending_write().query()) << "the op's output carries its event";
  download(x, out, consumer);  // waits for that event
  EXPECT_FALSE(out.storage()->pending_write().query());
  gate.open();
  out.storage()->pending_write().synchronize();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.data<float>()[i], 10.0f * static_cast<float>(i)) << i;
}

TEST_P(StreamOrdering, ToOnAnotherStreamWaitsForTheDefaultStreamsUseOfTheBlock) {
  const int64_t n = 300007;  // > 1 MiB: a segment of its own
  Stream other = rt().new_stream(0);
  Tensor first = pinned_values(n, [](int64_t i) { return static_cast<float>(i % 1000); });
  Tensor second = pinned_values(n, [](int64_t) { return -5.0f; });
  Tensor out = pinned_empty({n}), out_b = pinned_empty({n});
  empty_pool();
  Tensor a = first.to(dev(), op_stream());
  op_stream().synchronize();
  const void* block = a.raw_data();
  Gate gate;
  gate.hold(op_stream());
  ops::scale_(a, 2.0f);         // queued: reads and writes the block
  download(a, out, op_stream());  // queued after it
  a = Tensor();                 // the block goes back to the default stream's pool
  Tensor b = second.to(dev(), other);
  // cuda kernels keep no tensor alive, so the pool hands the same block out at once (virt
  // ops hold their tensors until they ran, so b gets another block there).
  if (GetParam() == DeviceKind::cuda) {
    EXPECT_EQ(b.raw_data(), block) << "the test needs the block reused";
  }
  EXPECT_FALSE(b.storage()->pending_write().query()) << "the copy must wait for the default stream";
  gate.open();
  out.storage()->pending_write().synchronize();
  download(b, out_b, other);
  out_b.storage()->pending_write().synchronize();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(out.data<float>()[i], 2.0f * static_cast<float>(i % 1000)) << "overwritten early at " << i;
    ASSERT_EQ(out_b.data<float>()[i], -5.0f) << i;
  }
}

TEST_P(StreamOrdering, DroppingBothEndsOfAQueuedCopyIsSafe) {
  const int64_t n = 65536;
  Stream s = rt().new_stream(0);
  {  // page-locked blocks for the churn below come from the pool's cache, not cudaHostAlloc
    std::vector<Tensor> warm;
    for (int i = 0; i < 10; ++i) warm.push_back(pinned_empty({n}));
  }
  { Tensor warm = Tensor::empty({n}, DType::f32, dev()); }
  Tensor out = pinned_empty({n});
  Tensor d;
  {
    Gate gate;
    gate.hold(s);
    {
      Tensor src = pinned_values(n, [](int64_t i) { return 0.5f * static_cast<float>(i); });
      d = src.to(dev(), s);  // the source is dropped before the copy ran
    }
    for (int i = 0; i < 8; ++i) pinned_values(n, [](int64_t) { return -1.0f; });  // would reuse it
    { Tensor lost = d.to(dev(), s); }  // a destination dropped before the copy ran
  }  // the gate opens
  download(d, out, s);
  s.synchronize();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.data<float>()[i], 0.5f * static_cast<float>(i)) << i;
}

INSTANTIATE_TEST_SUITE_P(Devices, StreamOrdering, ::testing::Values(DeviceKind::virt, DeviceKind::cuda),
                         [](const ::testing::TestParamInfo<DeviceKind>& info) {
                           return std::string(info.param == DeviceKind::cuda ? "cuda" : "virt");
                         });

// A host function must not call CUDA: the closure it ran (and what it captured) is released
// on another thread, and synchronize() returns after that.
TEST(CudaStreams, HostWorkIsReleasedOutsideTheCallback) {
  TD_REQUIRE_CUDA();
  Stream s = runtime(DeviceKind::cuda).new_stream(0);
  struct Mark {
    std::thread::id* where;
    ~Mark() { *where = std::this_thread::get_id(); }
  };
  std::thread::id ran_on, released_on;
  auto mark = std::make_shared<Mark>(Mark{&released_on});
  Tensor pinned = pinned_empty({1024});
  Event e = s.record();
  s.enqueue([mark, pinned, e, &ran_on] { ran_on = std::this_thread::get_id(); });
  mark.reset();
  pinned = Tensor();
  s.synchronize();
  EXPECT_NE(ran_on, std::thread::id());
  EXPECT_NE(released_on, std::thread::id()) << "not released by the time synchronize() returned";
  EXPECT_NE(released_on, ran_on) << "released inside the CUDA host function";
  EXPECT_NE(released_on, std::this_thread::get_id());
}

}  // namespace
}  // namespace tandem
