// Throughput planning on virt (tflops, gbps, compute=none): the cost model's FLOP counts on
// hand-computed shapes, ops that take at least their modelled time (lower bounds only: the
// machine is shared), outputs left untouched when nothing is computed, and option errors.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "backend/virt/virt_cost.h"
#include "tandem/device.h"
#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/virt.h"
#include "virt_test_util.h"

using namespace tandem;
using tandem::testing::to_host;

namespace {

constexpr int kIndex = 9;  // a device of its own: options persist on a device
constexpr Device kVirt{DeviceKind::virt, kIndex};
using Clock = std::chrono::steady_clock;

// Configures virt:9 from `options` for one test and restores its throttle at end() or
// destruction (after the queued work), so that copies read results back computing again.
class Planning {
 public:
  explicit Planning(const std::string& options) : before_(virt_throttle(kIndex)) {
    configure_device(DeviceSpec::parse("virt:" + std::to_string(kIndex) + "?" + options));
  }
  ~Planning() { end(); }
  void end() {
    if (ended_) return;
    ended_ = true;
    runtime(DeviceKind::virt).default_stream(kIndex).synchronize();
    set_virt_throttle(kIndex, before_);
  }

 private:
  VirtThrottle before_;
  bool ended_ = false;
};

// The default stream of virt:9 (the device exists from then on).
Stream stream() {
  configure_device(DeviceSpec::parse("virt:" + std::to_string(kIndex)));
  return runtime(DeviceKind::virt).default_stream(kIndex);
}

Tensor filled(const Shape& shape, float value) {
  return Tensor::full(shape, value).to(kVirt, stream());
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string error_of(const std::string& device) {
  try {
    configure_device(DeviceSpec::parse(device));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << device;
    return e.what();
  }
  return "";
}

}  // namespace

TEST(VirtCost, ConvolutionCountsTwoFlopsPerMultiplyAdd) {
  // x [2, 3, 10, 10], w [16, 3, 3, 3], y [2, 16, 8, 8]: 2 * N*K*C*R*S*P*Q = 2 * 2*16*3*3*3*8*8.
  EXPECT_DOUBLE_EQ(virt::conv2d_flops({16, 3, 3, 3}, {2, 16, 8, 8}, false), 110592.0);
  // A bias adds one per output: N*K*P*Q = 2048.
  EXPECT_DOUBLE_EQ(virt::conv2d_flops({16, 3, 3, 3}, {2, 16, 8, 8}, true), 112640.0);
  // Grouped (C/groups = 1 per filter): 2 * 1*4*1*5*5*6*6.
  EXPECT_DOUBLE_EQ(virt::conv2d_flops({4, 1, 5, 5}, {1, 4, 6, 6}, false), 7200.0);
}

TEST(VirtCost, LinearAndPerElementCounts) {
  // x [4, 20], w [10, 20]: 2 * 4*20*10 = 1600, bias 4*10 = 40.
  EXPECT_DOUBLE_EQ(virt::linear_flops(4, {10, 20}, false), 1600.0);
  EXPECT_DOUBLE_EQ(virt::linear_flops(4, {10, 20}, true), 1640.0);
  // max_pool2d 2x2 over y [1, 2, 3, 3]: 18 outputs x 4 compares.
  EXPECT_DOUBLE_EQ(virt::max_pool2d_forward_flops({1, 2, 3, 3}, 2, 2), 72.0);
}

// The per-op counts take the op's own arguments (one flops_<op> per op of tandem/op_list.h).
TEST(VirtCost, PerOpCountsReadTheArguments) {
  const Tensor x = Tensor::zeros({2, 3, 10, 10}), w = Tensor::zeros({16, 3, 3, 3}), b = Tensor::zeros({16});
  const Tensor y = Tensor::zeros({2, 16, 8, 8});
  EXPECT_DOUBLE_EQ(virt::flops_conv2d_forward(x, w, Tensor(), {}, y), 110592.0);
  EXPECT_DOUBLE_EQ(virt::flops_conv2d_forward(x, w, b, {}, y), 112640.0);
  EXPECT_DOUBLE_EQ(virt::flops_relu_forward(y, y), 2048.0);      // 1 per element
  EXPECT_DOUBLE_EQ(virt::flops_add_relu_forward(y, y, y), 4096.0);  // 2 per output
  EXPECT_DOUBLE_EQ(virt::flops_zero_(y), 0.0);
  const Tensor p = Tensor::zeros({10});
  EXPECT_DOUBLE_EQ(virt::flops_adam_step(p, p, p, p, {}, Tensor()), 150.0);  // 15 per parameter
  EXPECT_DOUBLE_EQ(virt::flops_sgd_step(p, p, Tensor(), {}, Tensor()), 60.0);
  // The scaler's steps count the gradients' elements: 2 and 3 per element.
  const std::vector<Tensor> grads{Tensor::zeros({4}), Tensor(), Tensor::zeros({6})};
  EXPECT_DOUBLE_EQ(virt::flops_amp_unscale_check_(grads, Tensor::zeros({4})), 20.0);
  EXPECT_DOUBLE_EQ(virt::flops_clip_grad_norm_(grads, 1.0, Tensor::zeros({1})), 30.0);
  EXPECT_DOUBLE_EQ(virt::flops_amp_update_scale_(Tensor::zeros({4}), {}), 4.0);
  // run_if_finite counts the device tensors it touches, not the host ones.
  const std::vector<Tensor> touched{Tensor::zeros({5}), Tensor::empty({7}, DType::f32, Device{DeviceKind::virt, 0})};
  EXPECT_DOUBLE_EQ(virt::flops_run_if_finite(Tensor(), touched, [] {}), 7.0);
}

TEST(VirtCost, RooflineTakesTheSlowerOfComputeAndMemory) {
  const virt::OpCost c{2e12, 3e9};
  EXPECT_DOUBLE_EQ(virt::modelled_seconds(c, 1, 0), 2.0);             // 2e12 FLOPs at 1 TFLOP/s
  EXPECT_DOUBLE_EQ(virt::modelled_seconds(c, 0, 1), 3.0);             // 3e9 bytes at 1 GB/s
  EXPECT_DOUBLE_EQ(virt::modelled_seconds(c, 1, 1), 3.0);             // memory-bound
  EXPECT_DOUBLE_EQ(virt::modelled_seconds(c, 1, 100), 2.0);           // compute-bound
  EXPECT_DOUBLE_EQ(virt::modelled_seconds(c, 0, 0), 0.0);             // nothing modelled
  EXPECT_DOUBLE_EQ(virt::modelled_seconds({1e30, 0}, 1e-6, 0), 1e6);  // capped
}

TEST(VirtPlanning, ComputeNoneTakesTheModelledTimeAndLeavesOutputsUntouched) {
  // linear x [100, 1000], w [1000, 1000]: 2e8 FLOPs, 0.2 s each at 1e9 FLOP/s; two queued.
  Tensor x = filled({100, 1000}, 1.0f), w = filled({1000, 1000}, 1.0f),
         y = filled({100, 1000}, -7.0f);
  Tensor labels = Tensor::zeros({100}, DType::i64).to(kVirt, stream());
  stream().synchronize();
  Planning planning("tflops=0.001&compute=none");
  EXPECT_FALSE(planning_note(kVirt).empty());
  const auto t0 = Clock::now();
  ops::linear_forward(x, w, Tensor(), y);
  ops::linear_forward(x, w, Tensor(), y);
  stream().synchronize();  // waits for both
  EXPECT_GE(seconds_since(t0), 0.4 * 0.99);
  EXPECT_EQ(ops::count_correct(y, labels), 0);  // an op that returns a value answers 0
  planning.end();
  const Tensor h = to_host(y);
  const float* v = h.data<float>();
  for (int64_t i = 0; i < h.numel(); i += 997) ASSERT_EQ(v[i], -7.0f) << i;  // not computed
}

TEST(VirtPlanning, MemoryBoundOpsTakeTheirBytesOverTheBandwidth) {
  Tensor t = filled({1000000}, 3.0f);  // 4e6 bytes: 0.4 s for zero_ at 1e7 bytes/s
  stream().synchronize();
  Planning planning("gbps=0.01&compute=none");
  const auto t0 = Clock::now();
  ops::zero_(t);
  stream().synchronize();
  EXPECT_GE(seconds_since(t0), 0.4 * 0.99);
  planning.end();
  EXPECT_EQ(to_host(t).data<float>()[123], 3.0f);
}

TEST(VirtPlanning, ComputeNoneCopiesMoveNoBytesAndTakeTheLinkTime) {
  Tensor y = filled({1000000}, -7.0f);
  const Tensor host = Tensor::full({1000000}, 5.0f);
  stream().synchronize();
  Planning planning("bw=0.01&latency_us=1000&compute=none");  // 4e6 bytes: 0.4 s + 1 ms
  const auto t0 = Clock::now();
  runtime(DeviceKind::virt)
      .copy_async(y.raw_data(), kVirt, host.raw_data(), Device{}, y.nbytes(), stream());
  stream().synchronize();
  EXPECT_GE(seconds_since(t0), 0.401 * 0.99);
  planning.end();
  EXPECT_EQ(to_host(y).data<float>()[4567], -7.0f);
}

TEST(VirtPlanning, ComputeAllRunsTheOpAndTakesAtLeastTheModelledTime) {
  Planning planning("tflops=0.0001");  // 1e8 FLOP/s; compute=all is the default
  // linear x [50, 1000] of ones, w [100, 1000] of halves: 2*50*1000*100 = 1e7 FLOPs, 0.1 s.
  Tensor x = filled({50, 1000}, 1.0f), w = filled({100, 1000}, 0.5f), y = filled({50, 100}, -7.0f);
  stream().synchronize();
  const auto t0 = Clock::now();
  ops::linear_forward(x, w, Tensor(), y);
  const Tensor h = to_host(y);
  EXPECT_GE(seconds_since(t0), 0.1 * 0.99);
  EXPECT_FLOAT_EQ(h.data<float>()[0], 500.0f);  // computed: 1000 x 1 x 0.5
  EXPECT_TRUE(planning_note(kVirt).empty());
}

TEST(VirtPlanning, OptionErrorsNameTheOptionAndWhatIsExpected) {
  const VirtThrottle before = virt_throttle(kIndex);
  const std::string dev = "virt:" + std::to_string(kIndex);
  EXPECT_NE(error_of(dev + "?tflops=0").find("tflops: expected a finite value >= 1e-06 TFLOP/s"),
            std::string::npos);
  EXPECT_NE(error_of(dev + "?tflops=-5").find("tflops: expected"), std::string::npos);
  EXPECT_NE(error_of(dev + "?tflops=inf").find("got inf"), std::string::npos);
  EXPECT_NE(error_of(dev + "?tflops=nan").find("tflops: expected"), std::string::npos);
  EXPECT_NE(error_of(dev + "?gbps=0").find("gbps: expected a finite value >= 1e-06 GB/s"),
            std::string::npos);
  EXPECT_NE(error_of(dev + "?tflops=fast").find("option tflops='fast' is not a number"),
            std::string::npos);
  EXPECT_NE(error_of(dev + "?compute=some")
                .find("compute: expected all or none in " + dev + ", got 'some'"),
            std::string::npos);
  const std::string unknown = error_of(dev + "?flops=1");
  EXPECT_NE(unknown.find("unknown option 'flops=1'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("tflops, gbps or compute"), std::string::npos) << unknown;
  // Nothing was applied.
  const VirtThrottle after = virt_throttle(kIndex);
  EXPECT_EQ(after.tflops, before.tflops);
  EXPECT_EQ(after.compute, before.compute);
  VirtThrottle bad;
  bad.tflops = -1;
  EXPECT_THROW(set_virt_throttle(kIndex, bad), Error);
}

TEST(VirtPlanning, OnlyAVirtDeviceWithComputeNoneIsAPlanningDevice) {
  EXPECT_EQ(planning_note(Device{}), "");
  Planning planning("compute=none");
  EXPECT_EQ(planning_note(kVirt),
            "virt compute=none: results are not computed; figures are throughput planning only");
}
