// The CUDA runtime: behaviour without a GPU (runs everywhere), and with one (label cuda,
// skipped when no device is present): streams and events, the caching device allocator,
// pinned-block reuse judged per block, mapped host memory, device optimizer kernels.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <vector>

#include "core/virt_test_util.h"
#include "cuda/cuda_test_util.h"
#include "tandem/optim/kernels.h"
#include "tandem/ops.h"
#include "tandem/pinned.h"

namespace tandem {
namespace {

using testing::cuda0;
using testing::cuda_stream;

using testing::Gate;  // holds a stream back until opened (tests/core/virt_test_util.h)

TEST(CudaNoDevice, ReportsMissingDeviceOrBuild) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  if (!cuda::built()) {
    try {
      runtime(DeviceKind::cuda);
      FAIL() << "expected Error(not_available)";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::not_available);
      EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
    }
    return;
  }
  EXPECT_EQ(runtime(DeviceKind::cuda).device_count(), 0);
  try {
    Tensor::empty({4, 4}, DType::f32, cuda0());
    FAIL() << "expected Error(not_available)";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_available);
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cuda::device_properties(0), Error);
  EXPECT_THROW(cuda::memory_stats(0), Error);
  EXPECT_THROW(cuda::mapped_empty({4}), Error);
  EXPECT_FALSE(cuda::versions().empty());
}

TEST(CudaRuntime, PropertiesAndVersions) {
  TD_REQUIRE_CUDA();
  const cuda::DeviceProperties p = cuda::device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.total_memory_bytes, size_t{1} << 30);
  EXPECT_GT(p.multiprocessor_count, 0);
  EXPECT_GE(p.major, 7);
  EXPECT_NE(cuda::versions().find("cuBLAS"), std::string::npos) << cuda::versions();
  EXPECT_THROW(cuda::device_properties(cuda::device_count()), Error);
}

TEST(CudaStreams, EventOrdersWorkAcrossStreams) {
  TD_REQUIRE_CUDA();
  Runtime& rt = runtime(DeviceKind::cuda);
  Stream a = rt.new_stream(0), b = rt.new_stream(0);
  const int64_t n = 1 << 20;
  // Page-locked host buffers: with pageable ones cudaMemcpyAsync may block the host.
  Tensor src = pinned_empty({n});
  std::memcpy(src.raw_data(), testing::random_tensor({n}, 1).raw_data(), src.nbytes());
  Tensor dev = Tensor::empty({n}, DType::f32, cuda0());
  // Allocated before the gate: cudaHostAlloc may wait for the device, which waits for the gate.
  Tensor host = pinned_empty({n});
  std::memset(host.raw_data(), 0xff, host.nbytes());
  Gate gate;
  gate.hold(a);  // the upload on `a` cannot run before the gate opens
  rt.copy_async(dev.raw_data(), cuda0(), src.raw_data(), Device{}, src.nbytes(), a);
  Event uploaded = a.record();
  EXPECT_FALSE(uploaded.query());
  b.wait(uploaded);  // the download on `b` must wait for the upload
  rt.copy_async(host.raw_data(), Device{}, dev.raw_data(), cuda0(), src.nbytes(), b);
  Event downloaded = b.record();
  EXPECT_FALSE(downloaded.query());
  gate.open();
  b.synchronize();
  EXPECT_TRUE(uploaded.query());
  EXPECT_TRUE(downloaded.query());
  EXPECT_EQ(std::memcmp(host.raw_data(), src.raw_data(), src.nbytes()), 0);
  a.synchronize();
}

TEST(CudaStreams, HostWorkRunsInOrderAndErrorsReachSynchronize) {
  TD_REQUIRE_CUDA();
  Stream s = runtime(DeviceKind::cuda).new_stream(0);
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) s.enqueue([&order, i] { order.push_back(i); });
  s.enqueue([] { throw_error(ErrorCode::io, "test", "planted failure"); });
  std::atomic<bool> after{false};
  s.enqueue([&after] { after = true; });
  try {
    s.synchronize();
    FAIL() << "expected the planted error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(after.load());
  EXPECT_NO_THROW(s.synchronize());  // reported once
}

TEST(CudaStreams, CopyRejectsForeignStreamsAndDevices) {
  TD_REQUIRE_CUDA();
  Runtime& rt = runtime(DeviceKind::cuda);
  float a = 0, b = 0;
  Stream cpu_stream = runtime(DeviceKind::cpu).default_stream(0);
  EXPECT_THROW(rt.copy_async(&a, Device{}, &b, Device{}, 4, cpu_stream), Error);
  EXPECT_THROW(rt.copy_async(&a, Device(DeviceKind::virt, 0), &b, cuda0(), 4, rt.default_stream(0)), Error);
}

TEST(CudaAllocator, ReusesBlocksAndLevelsOff) {
  TD_REQUIRE_CUDA();
  cuda::empty_cache(0);
  CachingAllocator& pool = cuda::device_allocator(0);
  pool.reset_peak_stats();
  const AllocatorStats before = pool.stats();
  void* first = nullptr;
  {
    Tensor t = Tensor::empty({1000, 1000}, DType::f32, cuda0());
    first = t.raw_data();
    EXPECT_GE(pool.stats().allocated_bytes, before.allocated_bytes + t.nbytes());
  }
  EXPECT_EQ(pool.stats().allocated_bytes, before.allocated_bytes);
  EXPECT_GT(pool.stats().reserved_bytes, before.reserved_bytes);  // cached, not returned
  {
    Tensor t = Tensor::empty({1000, 1000}, DType::f32, cuda0());
    EXPECT_EQ(t.raw_data(), first);  // the cached block is reused
  }
  // A steady loop of the same allocations does not grow the pool after the first round.
  size_t reserved_after_first = 0;
  for (int round = 0; round < 5; ++round) {
    std::vector<Tensor> ts;
    for (int64_t n : {1000, 70000, 3000000, 512, 65536}) ts.push_back(Tensor::empty({n}, DType::f32, cuda0()));
    if (round == 0) reserved_after_first = pool.stats().reserved_bytes;
  }
  EXPECT_EQ(pool.stats().peak_reserved_bytes, reserved_after_first);
  cuda::empty_cache(0);
  EXPECT_EQ(pool.stats().reserved_bytes, before.reserved_bytes);  // cached segments returned
  EXPECT_EQ(cuda::memory_stats(0).allocated_bytes, before.allocated_bytes);
}

TEST(CudaAllocator, OutOfMemoryIsAnError) {
  TD_REQUIRE_CUDA();
  const int64_t too_many = static_cast<int64_t>(cuda::device_properties(0).total_memory_bytes) * 2;
  try {
    Tensor::empty({too_many}, DType::u8, cuda0());
    FAIL() << "expected Error(out_of_memory)";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::out_of_memory) << e.what();
  }
  Tensor ok = Tensor::empty({1024}, DType::f32, cuda0());  // the device still works
  EXPECT_NE(ok.raw_data(), nullptr);
}

// A pinned block read by a pending upload is not handed out again; a block whose upload
// completed is, even while another block's upload is still pending (judged per block).
// Blocks of 3 MiB + 4 KiB take a 4 MiB segment each (no split), and the pool's cache is
// emptied first, so a and b are the only blocks of their size class to reuse; every host
// allocation after the gate is then served from them (no cudaHostAlloc while a stream is held).
TEST(CudaPinned, BlockReusedOnlyAfterItsOwnCopy) {
  TD_REQUIRE_CUDA();
  Runtime& rt = runtime(DeviceKind::cuda);
  CachingAllocator& pinned = pinned_allocator();
  pinned.empty_cache();
  Stream slow = rt.new_stream(0), fast = rt.new_stream(0);
  const int64_t n = (3 << 18) + 1024;  // floats: 3 MiB + 4 KiB
  Tensor dev_a = Tensor::empty({n}, DType::f32, cuda0());
  Tensor dev_b = Tensor::empty({n}, DType::f32, cuda0());
  Gate gate;
  void* a_ptr = nullptr;
  void* b_ptr = nullptr;
  {
    Tensor a = pinned_empty({n});
    Tensor b = pinned_empty({n});
    a_ptr = a.raw_data();
    b_ptr = b.raw_data();
    ASSERT_NE(a_ptr, b_ptr);
    gate.hold(slow);
    rt.copy_async(dev_a.raw_data(), cuda0(), a.raw_data(), Device{}, a.nbytes(), slow);
    record_pinned_use(a, slow.record());
    rt.copy_async(dev_b.raw_data(), cuda0(), b.raw_data(), Device{}, b.nbytes(), fast);
    Event b_done = fast.record();
    record_pinned_use(b, b_done);
    b_done.synchronize();
  }  // both freed; a's copy is still held back by the gate
  EXPECT_GE(pinned.pending_bytes(), static_cast<size_t>(n) * sizeof(float));
  Tensor again = pinned_empty({n});
  EXPECT_NE(again.raw_data(), a_ptr) << "a's upload has not run: its block must be held back";
  EXPECT_EQ(again.raw_data(), b_ptr) << "b's upload completed: its block must be reused at once";
  gate.open();
  slow.synchronize();
  Tensor third = pinned_empty({n});  // judged again: a's event completed
  EXPECT_EQ(third.raw_data(), a_ptr) << "a's block must be reused once its own upload completed";
  EXPECT_EQ(pinned.pending_bytes(), 0u);
}

// A kernel writes mapped host memory directly: scale_ on the device view of a mapped tensor.
TEST(CudaMapped, KernelsReadAndWriteMappedMemory) {
  TD_REQUIRE_CUDA();
  Tensor host = cuda::mapped_empty({257});
  float* h = host.data<float>();
  for (int i = 0; i < 257; ++i) h[i] = static_cast<float>(i);
  Tensor dev = Tensor::from_blob(cuda::mapped_device_pointer(host), {257}, DType::f32, cuda0());
  ops::scale_(dev, 2.0f);
  cuda_stream().synchronize();
  for (int i = 0; i < 257; ++i) ASSERT_EQ(h[i], 2.0f * i) << i;
  EXPECT_THROW(cuda::mapped_device_pointer(Tensor::empty({4})), Error);
}

// The device Adam and SGD kernels give the CPU scalar kernel's results bit for bit.
TEST(CudaOptim, MatchesCpuKernelsExactly) {
  TD_REQUIRE_CUDA();
  optim::set_simd_level(optim::SimdLevel::scalar);
  for (int64_t n : {1, 7, 1023, 1024, 1025, 100000}) {
    Tensor p = testing::random_tensor({n}, 11), g = testing::random_tensor({n}, 12);
    Tensor m = testing::random_tensor({n}, 13, -0.1f, 0.1f), v = testing::random_tensor({n}, 14, 0.0f, 0.01f);
    testing::Guarded dp(p), dg(g), dm(m), dv(v), dout(Shape{n}, DType::bf16);
    optim::AdamParams ap;
    ap.lr = 1e-3;
    ap.weight_decay = 0.01;
    ap.decoupled = true;
    ap.step = 3;
    Tensor out = Tensor::empty({n}, DType::bf16);
    optim::adam_step(p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), n, ap, out.raw_data(),
                     DType::bf16);
    ops::adam_step(dp.t, dg.t, dm.t, dv.t, ap, dout.t);
    Tensor rp = dp.check(), rm = dm.check(), rv = dv.check(), ro = dout.check();
    EXPECT_EQ(std::memcmp(rp.raw_data(), p.raw_data(), p.nbytes()), 0) << "adam param, n=" << n;
    EXPECT_EQ(std::memcmp(rm.raw_data(), m.raw_data(), m.nbytes()), 0) << "adam exp_avg, n=" << n;
    EXPECT_EQ(std::memcmp(rv.raw_data(), v.raw_data(), v.nbytes()), 0) << "adam exp_avg_sq, n=" << n;
    EXPECT_EQ(std::memcmp(ro.raw_data(), out.raw_data(), out.nbytes()), 0) << "adam bf16 out, n=" << n;

    Tensor q = testing::random_tensor({n}, 21), buf = testing::random_tensor({n}, 22);
    testing::Guarded dq(q), dgq(g), dbuf(buf);
    optim::SgdParams sp;
    sp.lr = 0.1;
    sp.momentum = 0.9;
    sp.nesterov = true;
    sp.weight_decay = 5e-4;
    optim::sgd_step(q.data<float>(), g.data<float>(), buf.data<float>(), n, sp);
    ops::sgd_step(dq.t, dgq.t, dbuf.t, sp);
    Tensor rq = dq.check(), rb = dbuf.check();
    EXPECT_EQ(std::memcmp(rq.raw_data(), q.raw_data(), q.nbytes()), 0) << "sgd param, n=" << n;
    EXPECT_EQ(std::memcmp(rb.raw_data(), buf.raw_data(), buf.nbytes()), 0) << "sgd buffer, n=" << n;
  }
  optim::set_simd_level(optim::best_simd_level());
  Tensor host_grad = Tensor::zeros({4});
  testing::Guarded on_device(host_grad);
  EXPECT_THROW(ops::sgd_step(on_device.t, host_grad, Tensor(), optim::SgdParams{}), Error);  // grad on cpu
}

}  // namespace
}  // namespace tandem
