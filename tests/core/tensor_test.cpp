#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "tandem/rng.h"
#include "tandem/tensor.h"
#include "tandem/thread_pool.h"

using namespace tandem;

TEST(Tensor, ShapeStridesAndViews) {
  Tensor t = Tensor::empty({2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  for (int i = 0; i < 24; ++i) t.data<float>()[i] = static_cast<float>(i);
  Tensor v = t.view({6, -1});
  EXPECT_EQ(v.shape(), (Shape{6, 4}));
  Tensor n = t.narrow(0, 1, 1);
  EXPECT_FLOAT_EQ(n.data<float>()[0], 12.0f);
  Tensor s = t.select(1);
  EXPECT_EQ(s.shape(), (Shape{3, 4}));
  EXPECT_FLOAT_EQ(s.item(5), 17.0f);
  EXPECT_THROW(t.view({5, 5}), Error);
  EXPECT_THROW(t.data<int64_t>(), Error);
}

TEST(Tensor, SixtyFourBitSizes) {
  // shapes beyond 2^31 elements are representable without allocating them
  Shape big{1 << 20, 1 << 12};
  EXPECT_EQ(shape_numel(big), int64_t{1} << 32);
}

// A shape whose element or byte count passes 2^63 used to wrap: [2^62, 8] made a 0-byte
// tensor of 2^65 elements (writes past its storage), [2^62] f32 asked for 0 bytes.
TEST(Tensor, ShapesWhoseSizeOverflowsAreRefused) {
  const int64_t big = int64_t{1} << 62;
  const auto error_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of([&] {
              Tensor::empty({big, 8});
            }),
            "[tensor] shape [4611686018427387904, 8]: expected at most 2^63 - 1 elements");
  EXPECT_EQ(error_of([&] { Tensor::empty({big}, DType::f32); }),
            "[tensor] shape [4611686018427387904] of f32: expected at most 2^63 - 1 bytes");
  EXPECT_EQ(error_of([&] {
              Tensor::empty({int64_t{1} << 32, int64_t{1} << 32}, DType::u8);
            }),
            "[tensor] shape [4294967296, 4294967296]: expected at most 2^63 - 1 elements");
  float x = 0;
  EXPECT_EQ(error_of([&] {
              Tensor::from_blob(&x, {big, 4}, DType::f32);
            }),
            "[tensor] shape [4611686018427387904, 4]: expected at most 2^63 - 1 elements");
  // A view may not reach such a shape from an empty tensor either (0 == 2^64 wrapped).
  EXPECT_EQ(error_of([&] {
              Tensor::empty({0, 4}).view({big, 4});
            }),
            "[tensor] shape [4611686018427387904, 4]: expected at most 2^63 - 1 elements");
  // Zero-sized dimensions anywhere keep the product at 0, whatever the others are.
  EXPECT_EQ(Tensor::empty({0, big, 8}).numel(), 0);
  EXPECT_EQ(Tensor::empty({big / 4, 0}, DType::f32).nbytes(), 0u);
  EXPECT_EQ(shape_numel({int64_t{1} << 31, int64_t{1} << 31}), int64_t{1} << 62);
}

TEST(Tensor, ErrorMessageNamesOperation) {
  try {
    Tensor::empty({2, 2}).view({3});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[view]", 0), 0u) << e.what();
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  }
}

TEST(DType, HalfConversionsRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(f16_to_float(float_to_f16(f)), f) << f;
  }
  EXPECT_EQ(f16_to_float(float_to_f16(1.0f + 1.0f / 4096)), 1.0f);  // ties to even
  EXPECT_TRUE(std::isinf(f16_to_float(float_to_f16(70000.0f))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.00390625f)), 1.0f);  // ties to even
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(Device, Parse) {
  auto s = DeviceSpec::parse("virt:1?speed=0.5&bw=12");
  EXPECT_EQ(s.device.kind, DeviceKind::virt);
  EXPECT_EQ(s.device.index, 1);
  EXPECT_DOUBLE_EQ(s.option("speed", 1), 0.5);
  EXPECT_DOUBLE_EQ(s.option("latency_us", 3), 3);
  EXPECT_THROW(DeviceSpec::parse("tpu"), Error);
  EXPECT_THROW(DeviceSpec::parse("cuda:x"), Error);
  EXPECT_EQ(DeviceSpec::parse("cuda:2").device.str(), "cuda:2");
}

TEST(Device, CudaUnavailableIsClear) {
  try {
    Tensor::empty({4}, DType::f32, Device{DeviceKind::cuda, 0});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_available);
  }
}

TEST(Philox, KnownAnswer) {
  // Random123 known-answer test for philox4x32_10 with counter and key all zero.
  auto r = Philox::block({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
}

TEST(Philox, KeyedStreamsDifferAndRepeat) {
  Philox a(1, 2, 3), b(1, 2, 3), c(1, 2, 4);
  uint32_t x = a.next_u32();
  EXPECT_EQ(x, b.next_u32());
  EXPECT_NE(x, c.next_u32());
  Philox d(7, 0);
  int counts[5] = {};
  for (int i = 0; i < 50000; ++i) counts[d.randint(5)]++;
  for (int c5 : counts) EXPECT_NEAR(c5, 10000, 500);
}

TEST(ThreadPool, ParallelForCoversRangeAndPropagates) {
  ThreadPool pool(3);
  std::vector<int> hit(1000, 0);
  pool.parallel_for(1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hit[static_cast<size_t>(i)]++;
  });
  for (int h : hit) EXPECT_EQ(h, 1);
  EXPECT_THROW(pool.parallel_for(10, [](int64_t, int64_t) { throw std::runtime_error("x"); }),
               std::runtime_error);
}
