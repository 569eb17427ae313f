// The channels_last (NHWC) pooling kernels against the NCHW ones: max pooling (values and
// indices, with and without indices), its backward, and global average pooling, f32 and bf16,
// on cpu and virt, must give the NCHW results exactly (ties, NaN, padding, odd channel
// counts). The NCHW forward is checked against a scalar reference too, so that a bug common
// to both layouts fails here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tandem/ops.h"
#include "tandem/rng.h"
#include "tandem/virt.h"
#include "virt_test_util.h"

using namespace tandem;
using namespace tandem::ops;

namespace {

constexpr Device kCpu{};
constexpr Device kVirt0{DeviceKind::virt, 0};

enum class Values { distinct, ties, nans };

// x [N, C, H, W] in NCHW order: uniform in [-1, 1), or drawn from 3 levels (many ties within
// a window), or uniform with about one element in 7 NaN (and a few windows all NaN).
std::vector<float> make_values(const Shape& s, Values kind, uint64_t seed) {
  Philox rng(seed, 0);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) {
    const float u = rng.uniform();
    v[i] = kind == Values::ties ? std::floor(u * 3.0f) - 1.0f : 2.0f * u - 1.0f;
    if (kind == Values::nans && (rng.randint(7) == 0 || i % 64 < 4))
      v[i] = std::numeric_limits<float>::quiet_NaN();
  }
  return v;
}

// A host tensor of `dt` holding `v` in `format`, moved to `dev`.
Tensor make(const Shape& s, const std::vector<float>& v, DType dt, MemoryFormat format,
            Device dev) {
  Tensor t = Tensor::from_vector(s, v);
  if (dt != DType::f32) t = t.to(dt);
  t = to_memory_format(t, format);
  if (dev.is_host()) return t;
  return t.to(dev, virt_current_stream(dev.index));
}

// t's elements in logical NCHW order, as double (bf16 and i32 exactly).
std::vector<double> logical(const Tensor& t) {
  const Tensor c = to_memory_format(tandem::testing::to_host(t), MemoryFormat::contiguous);
  std::vector<double> out(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i) out[static_cast<size_t>(i)] = c.item(i);
  return out;
}

void expect_equal(const std::vector<double>& want, const std::vector<double>& got,
                  const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool same = std::isnan(want[i]) ? std::isnan(got[i]) : want[i] == got[i];
    if (!same && ++bad <= 5)
      ADD_FAILURE() << what << " [" << i << "]: want " << want[i] << ", got " << got[i];
  }
  EXPECT_EQ(bad, 0) << what;
}

struct PoolResult {
  std::vector<double> y, indices, y_plain, dx;
};

// Forward with and without indices, then the backward, on `dev` in `format`.
PoolResult run_max_pool(const Shape& xs, const Pool2dParams& p, DType dt, Values kind,
                        MemoryFormat format, Device dev) {
  const Shape ys = max_pool2d_output_shape(xs, p);
  const Tensor x = make(xs, make_values(xs, kind, 11), dt, format, dev);
  const Tensor dy = make(ys, make_values(ys, Values::distinct, 12), dt, format, dev);
  const Tensor y = Tensor::empty(ys, dt, dev, format), y2 = Tensor::empty(ys, dt, dev, format);
  const Tensor idx = Tensor::empty(ys, DType::i32, dev, format);
  const Tensor dx = Tensor::empty(xs, dt, dev, format);
  max_pool2d_forward(x, p, y, idx);
  max_pool2d_forward(x, p, y2, Tensor());
  max_pool2d_backward(dy, idx, p, dx);
  return {logical(y), logical(idx), logical(y2), logical(dx)};
}

// Scalar reference of the forward: the first maximum in row-major window order, a NaN
// replacing any earlier candidate (PyTorch's rule); padding never wins.
void reference_max_pool(const Shape& xs, const Pool2dParams& p, const std::vector<double>& x,
                        std::vector<double>& y, std::vector<double>& idx) {
  const int64_t H = xs[2], W = xs[3];
  const Shape ys = max_pool2d_output_shape(xs, p);
  const int64_t P = ys[2], Q = ys[3];
  y.assign(static_cast<size_t>(shape_numel(ys)), 0.0);
  idx = y;
  for (int64_t pl = 0; pl < xs[0] * xs[1]; ++pl)
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t bi = -1;
        for (int64_t h = oh * p.stride_h - p.pad_h; h < oh * p.stride_h - p.pad_h + p.kernel_h; ++h)
          for (int64_t w = ow * p.stride_w - p.pad_w; w < ow * p.stride_w - p.pad_w + p.kernel_w;
               ++w) {
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const double v = x[static_cast<size_t>(pl * H * W + h * W + w)];
            if (bi < 0 || v > best || std::isnan(v)) best = v, bi = h * W + w;
          }
        y[static_cast<size_t>((pl * P + oh) * Q + ow)] = best;
        idx[static_cast<size_t>((pl * P + oh) * Q + ow)] = static_cast<double>(bi);
      }
}

struct Case {
  const char* name;
  Shape x;
  Pool2dParams p;
  Values values;
};

std::vector<Case> cases() {
  const Pool2dParams k2s2{2, 2, 2, 2, 0, 0}, k3s2p1{3, 3, 2, 2, 1, 1}, k3s1p1{3, 3, 1, 1, 1, 1};
  const Pool2dParams k2s1{2, 2, 1, 1, 0, 0}, k3s3{3, 3, 3, 3, 0, 0};
  return {
      {"k2s2_c32", {2, 32, 8, 8}, k2s2, Values::distinct},
      {"k2s2_ties", {2, 32, 8, 8}, k2s2, Values::ties},
      {"k2s2_nan", {2, 16, 6, 6}, k2s2, Values::nans},
      {"k2s2_odd_hw_c17", {2, 17, 7, 9}, k2s2, Values::ties},
      {"k2s2_c3", {3, 3, 10, 6}, k2s2, Values::distinct},
      {"stem_k3s2p1_c17", {2, 17, 9, 9}, k3s2p1, Values::distinct},
      {"stem_k3s2p1_ties", {2, 64, 8, 8}, k3s2p1, Values::ties},
      {"stem_k3s2p1_nan", {2, 3, 7, 8}, k3s2p1, Values::nans},
      {"k3s1p1_c70", {1, 70, 5, 5}, k3s1p1, Values::ties},
      {"k2s1_overlap_c17", {2, 17, 5, 6}, k2s1, Values::ties},
      {"k3s3_tiled_c3", {2, 3, 9, 6}, k3s3, Values::ties},
  };
}

class MaxPoolNhwc : public ::testing::TestWithParam<std::tuple<size_t, DType, bool>> {};

TEST_P(MaxPoolNhwc, MatchesNchwKernelsExactly) {
  const auto [ci, dt, on_virt] = GetParam();
  const Case c = cases()[ci];
  const Device dev = on_virt ? kVirt0 : kCpu;
  const PoolResult nchw = run_max_pool(c.x, c.p, dt, c.values, MemoryFormat::contiguous, kCpu);
  const PoolResult nhwc = run_max_pool(c.x, c.p, dt, c.values, MemoryFormat::channels_last, dev);
  // The NCHW kernel against the scalar reference, on the same (rounded) input.
  const Tensor x = make(c.x, make_values(c.x, c.values, 11), dt, MemoryFormat::contiguous, kCpu);
  std::vector<double> ref_y, ref_idx;
  reference_max_pool(c.x, c.p, logical(x), ref_y, ref_idx);
  expect_equal(ref_y, nchw.y, "reference y");
  expect_equal(ref_idx, nchw.indices, "reference indices");

  expect_equal(nchw.y, nhwc.y, "y");
  expect_equal(nchw.indices, nhwc.indices, "indices");
  expect_equal(nchw.y, nhwc.y_plain, "y without indices");
  expect_equal(nchw.dx, nhwc.dx, "dx");
  // The backward put some gradient somewhere (a zero dx would match a zero dx).
  int64_t nonzero = 0;
  for (double v : nhwc.dx) nonzero += v != 0.0;
  EXPECT_GE(nonzero,
            static_cast<int64_t>(nhwc.y.size()) / 10);  // a pixel wins at most 9 windows here
}

INSTANTIATE_TEST_SUITE_P(Cases, MaxPoolNhwc,
                         ::testing::Combine(::testing::Range<size_t>(0, cases().size()),
                                            ::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(cases()[std::get<0>(info.param)].name) + "_" +
                                  dtype_name(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_virt" : "_cpu");
                         });

class GlobalAvgPoolNhwc : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(GlobalAvgPoolNhwc, MatchesNchwKernelsExactly) {
  const auto [dt, on_virt] = GetParam();
  const Device dev = on_virt ? kVirt0 : kCpu;
  // Plane sizes below, at and above the eight partial sums; C odd, small and above a block.
  for (const Shape& xs :
       {Shape{2, 17, 4, 4}, Shape{3, 3, 1, 7}, Shape{2, 130, 5, 3}, Shape{1, 64, 7, 7}}) {
    const Shape ys{xs[0], xs[1], 1, 1};
    SCOPED_TRACE(shape_str(xs));
    std::vector<double> y[2], dx[2];
    for (int f = 0; f < 2; ++f) {
      const MemoryFormat format = f ? MemoryFormat::channels_last : MemoryFormat::contiguous;
      const Device d = f ? dev : kCpu;
      const Tensor x = make(xs, make_values(xs, Values::distinct, 21), dt, format, d);
      const Tensor dy = make(ys, make_values(ys, Values::distinct, 22), dt, format, d);
      const Tensor yt = Tensor::empty(ys, dt, d, format), dxt = Tensor::empty(xs, dt, d, format);
      global_avg_pool2d_forward(x, yt);
      global_avg_pool2d_backward(dy, dxt);
      y[f] = logical(yt);
      dx[f] = logical(dxt);
      if (f) continue;
      // The NCHW kernel against a float64 mean.
      const std::vector<double> xv = logical(x);
      const int64_t hw = xs[2] * xs[3];
      for (int64_t p = 0; p < xs[0] * xs[1]; ++p) {
        double s = 0;
        for (int64_t i = 0; i < hw; ++i) s += xv[static_cast<size_t>(p * hw + i)];
        EXPECT_NEAR(y[0][static_cast<size_t>(p)], s / static_cast<double>(hw),
                    dt == DType::f32 ? 1e-6 : 4e-3);
      }
    }
    expect_equal(y[0], y[1], "y");
    expect_equal(dx[0], dx[1], "dx");
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GlobalAvgPoolNhwc,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_virt" : "_cpu");
                         });

}  // namespace
