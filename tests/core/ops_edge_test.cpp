// Ops at the edges of their shapes and of the support query, found by feeding each op empty
// and out-of-range arguments in f32 and bf16:
//  - batch norm over zero channels divided by zero in its argument check (SIGFPE);
//  - convolutions with zero channels, filters or kernel size reached oneDNN, whose exception
//    (not a tandem::Error) escaped without the op's name; they are refused naming the shapes;
//  - max pooling writes i32 flat indices: planes of more than 2^31 - 1 elements are refused;
//  - supports() answers false, never throws, for op or dtype values outside their enums and
//    for devices that do not exist (a negative index, an index past the device count);
//  - bf16 outputs are rounded to nearest even, not truncated: exact ties pin it (the bf16
//    tests elsewhere allow half a unit either way, which truncation would also meet).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "tandem/ops.h"

using namespace tandem;
using namespace tandem::ops;

namespace {

std::string error_of(const std::function<void()>& f, ErrorCode want = ErrorCode::invalid_argument) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), want) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a tandem::Error: " << e.what();
    return e.what();
  }
  return "no error";
}

// The data dtypes the cpu backend runs here: f32, and bf16 where the CPU has it.
std::vector<DType> data_dtypes() {
  std::vector<DType> v{DType::f32};
  if (supports(Op::conv2d_forward, DType::bf16, Device{})) v.push_back(DType::bf16);
  return v;
}

}  // namespace

TEST(OpsEdges, BatchNormOverZeroChannelsIsANoOp) {
  for (DType dt : data_dtypes()) {
    const Tensor x = Tensor::zeros({2, 0, 3, 3}, dt), y = Tensor::zeros({2, 0, 3, 3}, dt);
    const Tensor c = Tensor::zeros({0});
    EXPECT_NO_THROW(batch_norm_forward_training(x, c, c, 1e-5, 0.1, y, c, c, c, c))
        << dtype_name(dt);
    EXPECT_NO_THROW(batch_norm_forward_training(x, c, c, 1e-5, 0.1, y, c, c, Tensor(), Tensor()));
    EXPECT_NO_THROW(batch_norm_forward_inference(x, c, c, c, c, 1e-5, y));
    EXPECT_NO_THROW(batch_norm_backward(y, x, c, c, c, 1e-5, y, c, c, false));
    // One value per channel is still refused in training with running statistics.
    const Tensor x1 = Tensor::zeros({1, 2, 1, 1}, dt), c2 = Tensor::zeros({2});
    EXPECT_EQ(
        error_of([&] { batch_norm_forward_training(x1, c2, c2, 1e-5, 0.1, x1, c2, c2, c2, c2); }),
        "[batch_norm_forward_training] expected more than 1 value per channel when training, found "
        "input "
        "[1, 2, 1, 1]");
  }
}

TEST(OpsEdges, ConvolutionsWithEmptyChannelsFiltersOrKernelsAreRefused) {
  const std::string want_tail = ": expected C, H, W, K, R and S of at least 1 (N may be 0)";
  for (DType dt : data_dtypes()) {
    const Tensor x0 = Tensor::zeros({1, 0, 4, 4}, dt), w0 = Tensor::zeros({3, 0, 3, 3}, dt);
    const Tensor y = Tensor::zeros({1, 3, 2, 2}, dt), b = Tensor::zeros({3});
    EXPECT_EQ(error_of([&] { conv2d_forward(x0, w0, b, {}, y); }),
              "[conv2d] x [1, 0, 4, 4], w [3, 0, 3, 3]" + want_tail);
    EXPECT_EQ(error_of([&] { conv2d_backward_data(y, w0, {}, x0); }),
              "[conv2d] x [1, 0, 4, 4], w [3, 0, 3, 3]" + want_tail);
    EXPECT_EQ(error_of([&] {
                conv2d_backward_weights(x0, y, {}, Tensor::zeros({3, 0, 3, 3}), b, false);
              }),
              "[conv2d] x [1, 0, 4, 4], w [3, 0, 3, 3]" + want_tail);
    // No filters (K = 0), and a 0x0 kernel.
    const Tensor x = Tensor::zeros({1, 2, 4, 4}, dt);
    EXPECT_EQ(error_of([&] {
                conv2d_forward(x, Tensor::zeros({0, 2, 3, 3}, dt), Tensor(), {},
                               Tensor::zeros({1, 0, 2, 2}, dt));
              }),
              "[conv2d] x [1, 2, 4, 4], w [0, 2, 3, 3]" + want_tail);
    EXPECT_EQ(error_of([&] {
                conv2d_backward_data(Tensor::zeros({1, 0, 2, 2}, dt),
                                     Tensor::zeros({0, 2, 3, 3}, dt), {}, x);
              }),
              "[conv2d] x [1, 2, 4, 4], w [0, 2, 3, 3]" + want_tail);
    EXPECT_EQ(error_of([&] {
                conv2d_forward(x, Tensor::zeros({3, 2, 0, 0}, dt), Tensor(), {},
                               Tensor::zeros({1, 3, 5, 5}, dt));
              }),
              "[conv2d] x [1, 2, 4, 4], w [3, 2, 0, 0]" + want_tail);
    // An empty image, padded to the kernel's size.
    const Conv2dParams pad{1, 1, 1, 1};
    EXPECT_EQ(error_of([&] {
                conv2d_forward(Tensor::zeros({1, 2, 0, 0}, dt), Tensor::zeros({3, 2, 1, 1}, dt),
                               Tensor(), pad, Tensor::zeros({1, 3, 2, 2}, dt));
              }),
              "[conv2d] x [1, 2, 0, 0], w [3, 2, 1, 1]" + want_tail);
    // An empty batch still runs (and leaves nothing to write).
    EXPECT_NO_THROW(conv2d_forward(Tensor::zeros({0, 2, 4, 4}, dt), Tensor::zeros({3, 2, 3, 3}, dt),
                                   b, {}, Tensor::zeros({0, 3, 2, 2}, dt)));
  }
}

TEST(OpsEdges, MaxPoolPlanesPastI32IndicesAreRefused) {
  // N = 0: the shape alone decides, nothing is allocated.
  const Tensor x = Tensor::zeros({0, 1, 65536, 32769}), y = Tensor::zeros({0, 1, 32768, 16384});
  const Tensor idx = Tensor::zeros({0, 1, 32768, 16384}, DType::i32);
  const std::string want =
      "x [0, 1, 65536, 32769]: expected planes of at most 2^31 - 1 elements (the indices are i32)";
  EXPECT_EQ(error_of([&] { max_pool2d_forward(x, {}, y, idx); }), "[max_pool2d_forward] " + want);
  EXPECT_EQ(error_of([&] { max_pool2d_backward(y, idx, {}, x); }),
            "[max_pool2d_backward] dx" + want.substr(1));
  EXPECT_NO_THROW(max_pool2d_forward(x, {}, y, Tensor()));  // without indices any plane is fine
  const Tensor x2 = Tensor::zeros({0, 1, 65536, 32767});    // 2^31 - 65536 elements
  EXPECT_NO_THROW(max_pool2d_forward(x2, {}, Tensor::zeros({0, 1, 32768, 16383}),
                                     Tensor::zeros({0, 1, 32768, 16383}, DType::i32)));
}

TEST(OpsEdges, SupportsAnswersFalseForValuesOutsideItsEnumsAndMissingDevices) {
  const Device cpu{};
  for (int op = kOpCount; op < 256; op += 37)
    for (DType t : {DType::f32, DType::bf16}) {
      EXPECT_FALSE(supports(static_cast<Op>(op), t, cpu)) << op;
      EXPECT_EQ(error_of([&] { require(static_cast<Op>(op), t, cpu); }, ErrorCode::not_available),
                "[op " + std::to_string(op) + "] " + dtype_name(t) + " is not supported on cpu");
    }
  for (int t = static_cast<int>(DType::u8) + 1; t < 256; t += 51)
    for (Op op : {Op::zero_, Op::relu_forward})
      EXPECT_FALSE(supports(op, static_cast<DType>(t), cpu)) << t;
  // Devices that do not exist run nothing (the virt count is 1 unless configured).
  for (Device d :
       {Device{DeviceKind::cpu, 1}, Device{DeviceKind::cpu, -1}, Device{DeviceKind::virt, -1},
        Device{DeviceKind::virt, 99}, Device{static_cast<DeviceKind>(7), 0}})
    for (DType t : {DType::f32, DType::bf16})
      EXPECT_FALSE(supports(Op::relu_forward, t, d)) << d.str();
  EXPECT_TRUE(supports(Op::relu_forward, DType::f32, Device{DeviceKind::virt, 0}));
  EXPECT_TRUE(supports(Op::relu_forward, DType::f32, cpu));
}

TEST(OpsEdges, Bf16OutputsRoundTiesToEven) {
  if (!supports(Op::linear_forward, DType::bf16, Device{})) GTEST_SKIP() << "no bf16 on this CPU";
  // bf16 values in [1, 2) are 1 + m/128. (1 + 1/128) * 1.5 = 1 + 65.5/128 exactly: the tie
  // between m = 65 (odd) and m = 66 (even) rounds to 1 + 66/128 = 1.515625; truncation would
  // give 1.5078125. (1 + 1/128) * 1.25 = 1 + 33.25/128 rounds down to 1 + 33/128 either way.
  const auto bf = [](const Shape& s, float v) { return Tensor::full(s, v).to(DType::bf16); };
  const auto first = [](const Tensor& t) { return t.item(0); };
  Tensor y = Tensor::zeros({2, 1}, DType::bf16);
  linear_forward(bf({2, 1}, 1.0078125f), bf({1, 1}, 1.5f), Tensor(), y);
  EXPECT_EQ(first(y), 1.515625);
  linear_forward(bf({2, 1}, -1.0078125f), bf({1, 1}, 1.5f), Tensor(), y);
  EXPECT_EQ(first(y), -1.515625);
  linear_forward(bf({2, 1}, 1.0078125f), bf({1, 1}, 1.25f), Tensor(), y);
  EXPECT_EQ(first(y), 1.2578125);
  // With the f32 bias added before the one rounding: 1 + 0.01171875 = 1 + 1.5/128.
  linear_forward(bf({2, 1}, 1.0f), bf({1, 1}, 1.0f), Tensor::full({1}, 0.01171875f), y);
  EXPECT_EQ(first(y), 1.015625);
  Tensor cy = Tensor::zeros({1, 1, 2, 2}, DType::bf16);
  conv2d_forward(bf({1, 1, 2, 2}, 1.0078125f), bf({1, 1, 1, 1}, 1.5f), Tensor(), {}, cy);
  EXPECT_EQ(first(cy), 1.515625);
  conv2d_forward(bf({1, 1, 2, 2}, 1.0f), bf({1, 1, 1, 1}, 1.0f), Tensor::full({1}, 0.01171875f), {},
                 cy);
  EXPECT_EQ(first(cy), 1.015625);
  Tensor s = bf({3}, 1.0f);
  scale_(s, 1.01171875f);  // 1 + 1.5/128
  EXPECT_EQ(first(s), 1.015625);
  Tensor d = bf({3}, 1.0f);
  add_(d, bf({3}, 1.0f), 0.01171875f);
  EXPECT_EQ(first(d), 1.015625);
  // Past the largest bf16 (about 3.39e38) the result is infinite, as in f32.
  Tensor o = bf({1}, 3.0e38f);
  scale_(o, 1.5f);
  EXPECT_TRUE(std::isinf(first(o)));
}
