// The cpu backend's channels_last (NHWC) batch-norm kernels against its NCHW ones, on cpu and
// on virt (which runs the cpu kernels on channels_last host aliases): the same inputs in both
// layouts give the same training forward (y, save_mean, save_var, running statistics),
// inference forward and backward (dx, dgamma, dbeta, with and without accumulate and the
// fused ReLU). The two kernels add in different orders, so values agree within a tolerance:
// f32 within 1e-5 relative (of max(1, |value|) for normalised outputs and gradient sums),
// bf16 outputs within one bf16 unit in the last place of the larger value (f32 values that
// differ in the last bits may round to neighbouring bf16 values). One channel has
// |mean| >> std, where the one-pass variance needs its shift; the f32 statistics are also
// checked against a float64 two-pass reference. Shapes include C = 3, C = 17, H*W = 1 (where
// channels_last and NCHW coincide) and N = 1.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tandem/ops.h"
#include "tandem/virt.h"

using namespace tandem;

namespace {

constexpr Device kCpu{};
constexpr Device kVirt0{DeviceKind::virt, 0};
constexpr double kEps = 1e-5, kMomentum = 0.1;

std::vector<float> randn(size_t n, uint32_t seed, float mean = 0.0f, float sd = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(mean, sd);
  std::vector<float> v(n);
  for (float& e : v) e = dist(gen);
  return v;
}

// x [N, C, H, W] in logical order: channel 1 (when C > 1) has mean 1000 and std 0.05.
std::vector<float> make_x(const Shape& s, uint32_t seed) {
  std::vector<float> v = randn(shape_numel(s), seed, 0.5f, 2.0f);
  const int64_t hw = s[2] * s[3];
  if (s[1] > 1)
    for (int64_t n = 0; n < s[0]; ++n)
      for (int64_t i = 0; i < hw; ++i) {
        float& e = v[(n * s[1] + 1) * hw + i];
        e = 1000.0f + 0.025f * e;
      }
  return v;
}

// A tensor on `dev` of dtype dt laid out in `f`, holding logical values v.
Tensor make(const Shape& s, const std::vector<float>& v, DType dt, MemoryFormat f, Device dev) {
  Tensor t = Tensor::from_vector(s, v);
  if (dt != DType::f32) t = t.to(dt);
  if (s.size() == 4) t = ops::to_memory_format(t, f);
  if (dev.is_host()) return t;
  Tensor d = t.to(dev, virt_current_stream(dev.index));
  virt_current_stream(dev.index).synchronize();
  return d;
}

Tensor empty(const Shape& s, DType dt, MemoryFormat f, Device dev) {
  return Tensor::empty(s, dt, dev, s.size() == 4 ? f : MemoryFormat::contiguous);
}

// The logical values of t (any device, format, f32 or bf16).
std::vector<float> values(const Tensor& t) {
  Tensor h = t;
  if (!t.device().is_host()) {
    h = t.to(kCpu, virt_current_stream(t.device().index));
    virt_current_stream(t.device().index).synchronize();
  }
  if (h.dim() == 4) h = ops::to_memory_format(h, MemoryFormat::contiguous);
  if (h.dtype() != DType::f32) h = h.to(DType::f32);
  return h.to_vector();
}

// |a - b| within tolerance: f32 values rel * max(floor, |b|); bf16 values one bf16 ulp.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, DType dt, double floor,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const double a = got[i], b = want[i];
    double tol = 1e-5 * std::max(floor, std::fabs(b));
    if (dt == DType::bf16) {
      const double m = std::max(std::fabs(a), std::fabs(b));
      tol = m > 0 ? std::ldexp(1.0, std::ilogb(m) - 7) : 0.0;
    }
    if (!(std::fabs(a - b) <= tol)) {
      ADD_FAILURE() << what << "[" << i << "]: " << a << " vs " << b << " (tolerance " << tol << ")";
      ++bad;
    }
  }
}

struct Case {
  Shape shape;
  DType dtype;
  Device dev;
  std::string name() const {
    return shape_str(shape) + " " + dtype_name(dtype) + " on " + (dev.is_host() ? "cpu" : "virt");
  }
};

std::vector<Case> cases() {
  std::vector<Shape> shapes{{4, 32, 5, 7}, {16, 24, 9, 9}, {2, 3, 4, 4}, {3, 17, 3, 5}, {8, 17, 1, 1}, {1, 17, 6, 5}};
  std::vector<DType> dts{DType::f32};
  if (ops::supports(ops::Op::batch_norm_forward_training, DType::bf16, kCpu)) dts.push_back(DType::bf16);
  std::vector<Case> v;
  for (Device dev : {kCpu, kVirt0})
    for (DType dt : dts)
      for (const Shape& s : shapes) v.push_back({s, dt, dev});
  return v;
}

// Inputs of one case, logical order.
struct Inputs {
  std::vector<float> x, dy, gamma, beta, rmean, rvar, dgamma0, dbeta0;
};

Inputs inputs(const Shape& s) {
  const size_t n = shape_numel(s), c = s[1];
  Inputs in{make_x(s, 1), randn(n, 2), randn(c, 3, 1.0f, 0.5f), randn(c, 4), randn(c, 5),
            randn(c, 6, 1.0f, 0.2f), randn(c, 7), randn(c, 8)};
  for (float& v : in.rvar) v = std::fabs(v) + 0.1f;
  for (float& v : in.dy) v *= 0.5f;
  return in;
}

struct Forward {
  Tensor y, save_mean, save_var, rmean, rvar;
};

Forward forward_training(const Case& c, const Inputs& in, MemoryFormat f, Device dev, bool relu) {
  const Shape ch{c.shape[1]};
  Forward r{empty(c.shape, c.dtype, f, dev), empty(ch, DType::f32, f, dev), empty(ch, DType::f32, f, dev),
            make(ch, in.rmean, DType::f32, f, dev), make(ch, in.rvar, DType::f32, f, dev)};
  ops::batch_norm_forward_training(make(c.shape, in.x, c.dtype, f, dev), make(ch, in.gamma, DType::f32, f, dev),
                                   make(ch, in.beta, DType::f32, f, dev), kEps, kMomentum, r.y, r.save_mean,
                                   r.save_var, r.rmean, r.rvar, relu);
  return r;
}

TEST(BatchNormNhwc, TrainingForwardMatchesNchw) {
  for (const Case& c : cases()) {
    const Inputs in = inputs(c.shape);
    for (bool relu : {false, true}) {
      const std::string what = c.name() + (relu ? " relu" : "");
      SCOPED_TRACE(what);
      const Forward ref = forward_training(c, in, MemoryFormat::contiguous, kCpu, relu);
      const Forward got = forward_training(c, in, MemoryFormat::channels_last, c.dev, relu);
      if (c.shape[2] * c.shape[3] > 1) {
        EXPECT_EQ(got.y.memory_format(), MemoryFormat::channels_last);
      }
      expect_close(values(got.y), values(ref.y), c.dtype, 1.0, "y");
      expect_close(values(got.save_mean), values(ref.save_mean), DType::f32, 0.0, "save_mean");
      expect_close(values(got.save_var), values(ref.save_var), DType::f32, 0.0, "save_var");
      expect_close(values(got.rmean), values(ref.rmean), DType::f32, 0.0, "running_mean");
      expect_close(values(got.rvar), values(ref.rvar), DType::f32, 0.0, "running_var");
      if (c.dtype != DType::f32) continue;
      // float64 two-pass statistics of x: biased var saved, unbiased var in the running one.
      const std::vector<float> mean = values(got.save_mean), var = values(got.save_var), rv = values(got.rvar);
      const int64_t hw = c.shape[2] * c.shape[3], count = c.shape[0] * hw;
      for (int64_t ch = 0; ch < c.shape[1]; ++ch) {
        double s = 0, sq = 0;
        for (int64_t n = 0; n < c.shape[0]; ++n)
          for (int64_t i = 0; i < hw; ++i) s += in.x[(n * c.shape[1] + ch) * hw + i];
        const double m = s / count;
        for (int64_t n = 0; n < c.shape[0]; ++n)
          for (int64_t i = 0; i < hw; ++i) sq += std::pow(in.x[(n * c.shape[1] + ch) * hw + i] - m, 2);
        EXPECT_NEAR(mean[ch], m, 1e-6 * std::max(1.0, std::fabs(m))) << "channel " << ch;
        EXPECT_NEAR(var[ch], sq / count, 1e-4 * sq / count + 1e-9) << "channel " << ch;
        const double want_rv = (1 - kMomentum) * in.rvar[ch] + kMomentum * sq / (count - 1);
        EXPECT_NEAR(rv[ch], want_rv, 1e-5 * want_rv) << "channel " << ch;
      }
    }
  }
}

TEST(BatchNormNhwc, InferenceForwardMatchesNchw) {
  for (const Case& c : cases()) {
    const Inputs in = inputs(c.shape);
    const Shape ch{c.shape[1]};
    for (bool relu : {false, true}) {
      SCOPED_TRACE(c.name() + (relu ? " relu" : ""));
      std::vector<float> out[2];
      for (int i = 0; i < 2; ++i) {
        const MemoryFormat f = i ? MemoryFormat::channels_last : MemoryFormat::contiguous;
        const Device dev = i ? c.dev : kCpu;
        const Tensor y = empty(c.shape, c.dtype, f, dev);
        ops::batch_norm_forward_inference(
            make(c.shape, in.x, c.dtype, f, dev), make(ch, in.gamma, DType::f32, f, dev),
            make(ch, in.beta, DType::f32, f, dev), make(ch, in.rmean, DType::f32, f, dev),
            make(ch, in.rvar, DType::f32, f, dev), kEps, y, relu);
        out[i] = values(y);
      }
      expect_close(out[1], out[0], c.dtype, 1.0, "y");
      if (relu) {
        for (float v : out[1]) ASSERT_GE(v, 0.0f);
      }
    }
  }
}

TEST(BatchNormNhwc, BackwardMatchesNchw) {
  for (const Case& c : cases()) {
    const Inputs in = inputs(c.shape);
    const Shape ch{c.shape[1]};
    for (bool relu : {false, true})
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(c.name() + (relu ? " relu" : "") + (accumulate ? " accumulate" : ""));
        // Statistics and y (for the ReLU mask) from the NCHW forward, fed to both.
        const Forward fw = forward_training(c, in, MemoryFormat::contiguous, kCpu, relu);
        const std::vector<float> y = values(fw.y), mean = values(fw.save_mean), var = values(fw.save_var);
        // dy as the kernels read it (rounded to bf16 for bf16 cases).
        const std::vector<float> dyq = values(make(c.shape, in.dy, c.dtype, MemoryFormat::contiguous, kCpu));
        std::vector<float> dx[2], dg[2], db[2];
        for (int i = 0; i < 2; ++i) {
          const MemoryFormat f = i ? MemoryFormat::channels_last : MemoryFormat::contiguous;
          const Device dev = i ? c.dev : kCpu;
          const Tensor tdx = empty(c.shape, c.dtype, f, dev);
          const Tensor tdg = make(ch, in.dgamma0, DType::f32, f, dev), tdb = make(ch, in.dbeta0, DType::f32, f, dev);
          ops::batch_norm_backward(make(c.shape, in.dy, c.dtype, f, dev), make(c.shape, in.x, c.dtype, f, dev),
                                   make(ch, in.gamma, DType::f32, f, dev), make(ch, mean, DType::f32, f, dev),
                                   make(ch, var, DType::f32, f, dev), kEps, tdx, tdg, tdb, accumulate, relu,
                                   relu ? make(c.shape, y, c.dtype, f, dev) : Tensor());
          dx[i] = values(tdx);
          dg[i] = values(tdg);
          db[i] = values(tdb);
        }
        expect_close(dx[1], dx[0], c.dtype, 1.0, "dx");
        expect_close(dg[1], dg[0], DType::f32, 1.0, "dgamma");
        expect_close(db[1], db[0], DType::f32, 1.0, "dbeta");
        if (relu)  // masked elements see no gradient: dbeta is the sum of dy over y > 0
          for (int64_t k = 0; k < c.shape[1]; ++k) {
            double s = accumulate ? in.dbeta0[k] : 0.0;
            const int64_t hw = c.shape[2] * c.shape[3];
            for (int64_t n = 0; n < c.shape[0]; ++n)
              for (int64_t i = 0; i < hw; ++i) {
                const int64_t e = (n * c.shape[1] + k) * hw + i;
                if (y[e] > 0) s += dyq[e];
              }
            EXPECT_NEAR(db[1][k], s, 1e-5 * std::max(1.0, std::fabs(s))) << "channel " << k;
          }
      }
  }
}

TEST(BatchNormNhwc, NanPropagates) {
  const Shape s{2, 16, 3, 3};
  for (Device dev : {kCpu, kVirt0}) {
    Inputs in = inputs(s);
    in.x[5 * 9 + 4] = std::nanf("");  // channel 5 of image 0
    const Forward fw = forward_training({s, DType::f32, dev}, in, MemoryFormat::channels_last, dev, true);
    const std::vector<float> y = values(fw.y), mean = values(fw.save_mean);
    EXPECT_TRUE(std::isnan(mean[5]));
    EXPECT_FALSE(std::isnan(mean[4]));
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < 9; ++i) {
        EXPECT_TRUE(std::isnan(y[(n * 16 + 5) * 9 + i])) << "y of channel 5 through the fused ReLU";
        EXPECT_FALSE(std::isnan(y[(n * 16 + 6) * 9 + i]));
      }
  }
}

}  // namespace
