// The cpu backend's convolution paths — NCHW on oneDNN's blocked kernels (the contiguous
// default), NCHW on its plain kernels (TANDEM_CONV_PLAIN=1), and channels_last (NHWC) on both
// kernel choices (TANDEM_CONV_LAYOUT=nhwc: oneDNN's NHWC kernels, the default from AVX-512 up;
// =blocked: reordered to the blocked layout, the default below) — each against the float64
// reference of f64_reference.h, with tolerances derived from fp32 accumulation (the rounding model
// is stated there):
//  - every convolution resnet18-cifar runs (forward, backward data, backward weights) on
//    uniform zero-mean data: relative L2 error within kLambda * sqrt(sum_rel_var(K)), K the
//    length of each output's sum;
//  - one training step of resnet18-cifar (8 images, the input the layouts were compared on):
//    the ReLU decisions of each path's forward differ from float64's only within the fp32
//    error of the ReLU input, and through those decisions every gradient and the logits are
//    within kLambda * sqrt(A) of float64, A the accumulated relative variance.
// Before these tests the paths were compared with each other at 1e-4 and disagreed by
// 2.5e-3 to 4e-3 (on an AVX2 CPU and with oneDNN's blocked kernels on an AVX-512 one): a
// ReLU input in layer2.0 is -5.8e-7, inside its fp32 error band, and a path that puts it on
// the other side of 0 moves every gradient below it by about 3e-3 (docs/resnet.md). No
// kernel is off. The tests run at the process's instruction-set level (TANDEM_MAX_CPU_ISA;
// the suite's floor pass runs them at avx2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "f64_reference.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/models.h"
#include "tandem/nn/residual.h"
#include "tandem/ops.h"
#include "virt_test_util.h"

using namespace tandem;
namespace f64 = tandem::testing::f64;

namespace {

constexpr Device kCpu{};

// One way to run the model's convolutions: TANDEM_CHANNELS_LAST, TANDEM_CONV_PLAIN and, for
// channels_last, TANDEM_CONV_LAYOUT.
struct Path {
  const char* name;
  MemoryFormat format;
  bool plain;
  const char* conv_layout = nullptr;
};
const Path kPaths[] = {
    {"nchw blocked", MemoryFormat::contiguous, false},
    {"nchw plain", MemoryFormat::contiguous, true},
    {"channels_last on nhwc kernels", MemoryFormat::channels_last, false, "nhwc"},
    {"channels_last on blocked kernels", MemoryFormat::channels_last, false, "blocked"}};

// Sets the path's switches for the scope (both are read when a model or primitive is made).
class PathScope {
 public:
  explicit PathScope(const Path& p) {
    ::setenv("TANDEM_CHANNELS_LAST", p.format == MemoryFormat::channels_last ? "1" : "0", 1);
    if (p.plain) ::setenv("TANDEM_CONV_PLAIN", "1", 1);
    if (p.conv_layout) ::setenv("TANDEM_CONV_LAYOUT", p.conv_layout, 1);
  }
  ~PathScope() {
    ::unsetenv("TANDEM_CHANNELS_LAST");
    ::unsetenv("TANDEM_CONV_PLAIN");
    ::unsetenv("TANDEM_CONV_LAYOUT");
  }
  PathScope(const PathScope&) = delete;
  PathScope& operator=(const PathScope&) = delete;
};

std::vector<double> to_f64(const Tensor& t) {
  const std::vector<float> v = tandem::testing::to_host(t).to_vector();
  return {v.begin(), v.end()};
}

f64::T4 t4(const Tensor& t) {
  f64::T4 r(t.size(0), t.size(1), t.size(2), t.size(3));
  r.v = to_f64(t);
  return r;
}

double rel_l2(const std::vector<double>& a, const std::vector<double>& ref) {
  EXPECT_EQ(a.size(), ref.size());
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size() && i < ref.size(); ++i) {
    d += (a[i] - ref[i]) * (a[i] - ref[i]);
    n += ref[i] * ref[i];
  }
  return std::sqrt(d / std::max(n, 1e-300));
}

double l2(const std::vector<double>& a) {
  double n = 0;
  for (double e : a) n += e * e;
  return std::sqrt(n);
}

// ---- the reference itself ---------------------------------------------------------------

// The three convolution loops are adjoint to each other: <conv(x, w), dy> = <x, bwd_data(dy,
// w)> = <w, bwd_weights(x, dy)>, to double precision; batch norm's backward matches central
// differences of <bn(x), dy>.
TEST(F64Reference, LayersAreAdjointAndMatchFiniteDifferences) {
  auto rnd = [](int64_t n, int64_t c, int64_t h, int64_t w, uint64_t seed) {
    f64::T4 t = t4(tandem::testing::random_host({n, c, h, w}, seed));
    return t;
  };
  auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
  };
  for (const auto& [stride, pad, r] :
       {std::tuple{1, 1, 3}, std::tuple{2, 1, 3}, std::tuple{2, 0, 1}}) {
    const f64::T4 x = rnd(2, 3, 7, 7, 1), w = rnd(4, 3, r, r, 2);
    const f64::T4 y = f64::conv_forward(x, w, stride, pad);
    const f64::T4 dy = rnd(y.n, y.c, y.h, y.w, 3);
    const double ydy = dot(y.v, dy.v);
    EXPECT_NEAR(dot(x.v, f64::conv_backward_data(dy, w, stride, pad, 7, 7).v), ydy,
                1e-12 * std::fabs(ydy));
    EXPECT_NEAR(dot(w.v, f64::conv_backward_weights(x, dy, stride, pad, r, r).v), ydy,
                1e-12 * std::fabs(ydy));
  }
  f64::T4 x = rnd(3, 2, 3, 3, 4);
  const f64::T4 dy = rnd(3, 2, 3, 3, 5);
  const std::vector<double> gamma{1.5, -0.5}, beta{0.25, 0.0};
  f64::BnCache cache;
  std::vector<double> dgamma, dbeta;
  f64::bn_forward(x, gamma, beta, 1e-5, cache);
  const f64::T4 dx2 = f64::bn_backward(dy, x, gamma, cache, dgamma, dbeta);
  for (size_t i = 0; i < x.v.size(); i += 5) {
    const double h = 1e-6, keep = x.v[i];
    f64::BnCache c2;
    x.v[i] = keep + h;
    const double lp = dot(f64::bn_forward(x, gamma, beta, 1e-5, c2).v, dy.v);
    x.v[i] = keep - h;
    const double lm = dot(f64::bn_forward(x, gamma, beta, 1e-5, c2).v, dy.v);
    x.v[i] = keep;
    EXPECT_NEAR(dx2.v[i], (lp - lm) / (2 * h), 1e-7) << "dx[" << i << "]";
  }
  EXPECT_NEAR(dbeta[0] + dbeta[1], dot(dy.v, std::vector<double>(dy.v.size(), 1.0)), 1e-12);
}

// ---- single convolutions ----------------------------------------------------------------

struct ConvShape {
  int64_t c, k, h, r, stride, pad;
};
// Every convolution of resnet18-cifar at 32x32: the stem, the 3x3 of each stage, the strided
// 3x3 and 1x1 (downsample) entering stages 2-4.
const ConvShape kConvs[] = {
    {1, 64, 32, 3, 1, 1},    {64, 64, 32, 3, 1, 1},   {64, 128, 32, 3, 2, 1},
    {64, 128, 32, 1, 2, 0},  {128, 128, 16, 3, 1, 1}, {128, 256, 16, 3, 2, 1},
    {128, 256, 16, 1, 2, 0}, {256, 256, 8, 3, 1, 1},  {256, 512, 8, 3, 2, 1},
    {256, 512, 8, 1, 2, 0},  {512, 512, 4, 3, 1, 1}};

TEST(F64Reference, ConvolutionsOfResnet18CifarOnEveryPath) {
  const int64_t n = 4;
  for (const ConvShape& cs : kConvs) {
    const Shape xs{n, cs.c, cs.h, cs.h}, ws{cs.k, cs.c, cs.r, cs.r};
    const ops::Conv2dParams p{cs.stride, cs.stride, cs.pad, cs.pad};
    const Shape ys = ops::conv2d_output_shape(xs, ws, p);
    const Tensor x = tandem::testing::random_host(xs, 1), w = tandem::testing::random_host(ws, 2),
                 dy = tandem::testing::random_host(ys, 3);
    const f64::T4 xd = t4(x), wd = t4(w), dyd = t4(dy);
    const std::vector<double> y_ref = f64::conv_forward(xd, wd, cs.stride, cs.pad).v;
    const std::vector<double> dx_ref =
        f64::conv_backward_data(dyd, wd, cs.stride, cs.pad, cs.h, cs.h).v;
    const std::vector<double> dw_ref =
        f64::conv_backward_weights(xd, dyd, cs.stride, cs.pad, cs.r, cs.r).v;
    // The length of each output's sum.
    const double k_fwd = double(cs.c * cs.r * cs.r), k_data = double(cs.k * cs.r * cs.r),
                 k_w = double(n * ys[2] * ys[3]);
    auto tol = [](double k) { return f64::kLambda * std::sqrt(f64::sum_rel_var(k)); };
    for (const Path& path : kPaths) {
      const PathScope scope(path);
      const Tensor xf = ops::to_memory_format(x, path.format),
                   dyf = ops::to_memory_format(dy, path.format);
      Tensor y = Tensor::empty(ys, DType::f32, kCpu, path.format),
             dx = Tensor::empty(xs, DType::f32, kCpu, path.format);
      Tensor dw = Tensor::zeros(ws);
      ops::conv2d_forward(xf, w, Tensor(), p, y);
      ops::conv2d_backward_data(dyf, w, p, dx);
      ops::conv2d_backward_weights(xf, dyf, p, dw, Tensor(), false);
      const std::string what = fmt::format("{}: x {} w {} stride {}", path.name, shape_str(xs),
                                           shape_str(ws), cs.stride);
      EXPECT_LE(rel_l2(to_f64(y), y_ref), tol(k_fwd)) << what << " forward";
      EXPECT_LE(rel_l2(to_f64(dx), dx_ref), tol(k_data)) << what << " backward data";
      EXPECT_LE(rel_l2(to_f64(dw), dw_ref), tol(k_w)) << what << " backward weights";
    }
  }
}

// ---- batch norm ----------------------------------------------------------------------------

// Training-mode batch norm (the NCHW and the channels_last kernels, with and without the fused
// ReLU) on the activation shapes of resnet18-cifar, 8 images, zero-mean unit-variance x,
// against float64. Each channel's statistics and the backward's two sums run over M = N H W
// values; the tolerance adds their relative variance sum_rel_var(M) (twice: the mean and the
// variance, or sum(dy) and sum(dy (x - mean))) to four elementwise roundings (y = (x - mean)
// * scale + shift; dx = a (dy - mean(dy) - (x - mean) k)), kLambda standard deviations. The
// backward's ReLU mask is the fp32 forward's y > 0 in both (a decision, not a rounding).
TEST(F64Reference, BatchNormOfResnet18CifarOnBothLayouts) {
  constexpr double kU2 = 0x1p-48;
  for (const Shape& s :
       {Shape{8, 64, 32, 32}, Shape{8, 128, 16, 16}, Shape{8, 256, 8, 8}, Shape{8, 512, 4, 4}}) {
    const Shape ch{s[1]};
    const Tensor x = tandem::testing::random_host(s, 4), dy = tandem::testing::random_host(s, 5);
    Tensor gamma = tandem::testing::random_host(ch, 6), beta = tandem::testing::random_host(ch, 7);
    for (int64_t c = 0; c < s[1]; ++c) gamma.data<float>()[c] += 1.5f;  // in [0.5, 2.5]
    // x uniform in [-1, 1] has variance 1/3: scaled to 1.
    Tensor xs = Tensor::empty(s);
    for (int64_t i = 0; i < x.numel(); ++i) xs.data<float>()[i] = x.data<float>()[i] * 1.7320508f;
    const f64::T4 xd = t4(xs), dyd = t4(dy);
    const std::vector<double> g = to_f64(gamma), b = to_f64(beta);
    f64::BnCache cache;
    const std::vector<double> y_ref = f64::bn_forward(xd, g, b, 1e-5, cache).v;
    const double m = double(s[0] * s[2] * s[3]);
    const double tol = f64::kLambda * std::sqrt(2 * f64::sum_rel_var(m) + 4 * kU2);
    for (MemoryFormat f : {MemoryFormat::contiguous, MemoryFormat::channels_last})
      for (bool relu : {false, true}) {
        const std::string what =
            fmt::format("{} {}{}", shape_str(s), memory_format_name(f), relu ? " + relu" : "");
        const Tensor xf = ops::to_memory_format(xs, f), dyf = ops::to_memory_format(dy, f);
        Tensor y = Tensor::empty(s, DType::f32, kCpu, f),
               dx = Tensor::empty(s, DType::f32, kCpu, f);
        Tensor mean = Tensor::empty(ch), var = Tensor::empty(ch), dgamma = Tensor::zeros(ch),
               dbeta = Tensor::zeros(ch);
        ops::batch_norm_forward_training(xf, gamma, beta, 1e-5, 0.1, y, mean, var, Tensor(),
                                         Tensor(), relu);
        ops::batch_norm_backward(dyf, xf, gamma, mean, var, 1e-5, dx, dgamma, dbeta, false, relu,
                                 y);
        const std::vector<double> yv = to_f64(y);
        std::vector<double> want_y = y_ref;
        f64::T4 g_in = dyd;
        for (size_t i = 0; i < want_y.size(); ++i)
          if (relu) {
            want_y[i] = std::max(want_y[i], 0.0);
            if (!(yv[i] > 0)) g_in.v[i] = 0;  // the fp32 forward's decisions
          }
        std::vector<double> dgamma_ref, dbeta_ref;
        const std::vector<double> dx_ref =
            f64::bn_backward(g_in, xd, g, cache, dgamma_ref, dbeta_ref).v;
        EXPECT_LE(rel_l2(yv, want_y), tol) << what << ": y";
        // The mean is near 0: its error is measured against the data's scale (rms 1).
        std::vector<double> var_ref;
        for (double is : cache.inv_std) var_ref.push_back(1.0 / (is * is) - 1e-5);
        EXPECT_LE(rel_l2(to_f64(mean), cache.mean) * l2(cache.mean) / std::sqrt(double(s[1])), tol)
            << what << ": mean";
        EXPECT_LE(rel_l2(to_f64(var), var_ref), tol) << what << ": var";
        EXPECT_LE(rel_l2(to_f64(dx), dx_ref), tol) << what << ": dx";
        EXPECT_LE(rel_l2(to_f64(dgamma), dgamma_ref), tol) << what << ": dgamma";
        EXPECT_LE(rel_l2(to_f64(dbeta), dbeta_ref), tol) << what << ": dbeta";
      }
  }
}

// ---- resnet18-cifar, one step -----------------------------------------------------------

constexpr int64_t kBatch = 8;

struct Step {
  std::map<std::string, std::vector<double>> grads;  // and "logits"
  std::map<std::string, std::vector<double>> params;
  std::vector<std::vector<uint8_t>>
      masks;  // the run's ReLU decisions (Resnet18Cifar::relu_names())
};

std::vector<uint8_t> positive(const Tensor& t) {
  std::vector<uint8_t> m;
  for (float v : tandem::testing::to_host(t).to_vector()) m.push_back(v > 0.0f);
  return m;
}

// The model's forward module by module (Sequential and Residual do nothing else: children in
// order, then relu(body + shortcut)), keeping each ReLU's decisions: the stem's and each
// block body's batch norm (its ReLU fused in), and each block's output. The kernels are
// deterministic, so these are the decisions of the model's own forward on the same input.
std::vector<std::vector<uint8_t>> relu_decisions(nn::Module& model, const Tensor& x) {
  std::vector<std::vector<uint8_t>> masks;
  Tensor h = x;
  for (const nn::NamedChild& top : model.named_children()) {
    if (top.name.rfind("layer", 0) != 0) {
      h = top.module->forward(h);
      if (top.name == "bn1") masks.push_back(positive(h));
      continue;
    }
    for (const nn::NamedChild& b : top.module->named_children()) {
      auto* block = dynamic_cast<nn::Residual*>(b.module);
      EXPECT_NE(block, nullptr) << top.name << "." << b.name;
      if (!block) return masks;
      const std::vector<nn::NamedChild> body =
          block->body().named_children();  // conv1, bn1, relu, ...
      masks.push_back(positive(body[1].module->forward(body[0].module->forward(h))));
      h = block->forward(h);
      masks.push_back(positive(h));
    }
  }
  return masks;
}

// One forward and backward of resnet18-cifar (ModelSpec{1, 32, 32, 10}, seed 5) on 8 fixed
// images with labels i % 10, in training mode: the gradients of the batch-mean loss.
Step train_step(const Path& path) {
  const PathScope scope(path);
  nn::ModulePtr m = nn::make_model("resnet18-cifar", nn::ModelSpec{1, 32, 32, 10}, 5);
  nn::CrossEntropyLoss loss;
  const Tensor x = tandem::testing::random_host({kBatch, 1, 32, 32}, 20);
  Tensor labels = Tensor::empty({kBatch}, DType::i64);
  for (int64_t i = 0; i < kBatch; ++i) labels.data<int64_t>()[i] = i % 10;
  Step r;
  for (nn::Parameter* p : m->parameters()) {
    r.params[p->name] = to_f64(p->value);
    ops::zero_(p->grad);
  }
  m->train(true);
  r.masks = relu_decisions(*m, x);
  const Tensor logits = m->forward(x);
  loss.forward(logits, labels);
  m->backward(loss.backward());
  for (nn::Parameter* p : m->parameters()) r.grads[p->name] = to_f64(p->grad);
  r.grads["logits"] = to_f64(logits);
  return r;
}

TEST(F64Reference, Resnet18CifarGradientsOnEveryPath) {
  std::vector<Step> steps;
  for (const Path& p : kPaths) steps.push_back(train_step(p));
  for (const Step& s : steps)
    ASSERT_EQ(s.params, steps[0].params) << "the paths start from one set of weights";
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < kBatch; ++i) labels.push_back(i % 10);
  const f64::Resnet18Cifar ref(steps[0].params,
                               t4(tandem::testing::random_host({kBatch, 1, 32, 32}, 20)), labels);
  std::vector<f64::Resnet18CifarResult> results;  // paths with the same decisions share one
  for (size_t i = 0; i < std::size(kPaths); ++i) {
    size_t same = 0;
    while (same < i && steps[same].masks != steps[i].masks) ++same;
    results.push_back(same < i ? results[same] : ref.backward(&steps[i].masks));
    const f64::Resnet18CifarResult& r = results.back();
    ASSERT_EQ(r.grads.size(), steps[i].grads.size());
    for (const auto& [name, g] : r.grads)
      EXPECT_LE(rel_l2(steps[i].grads.at(name), g), r.tolerance.at(name))
          << kPaths[i].name << ": " << name;
    // A decision may differ from float64's only where rounding can flip it.
    EXPECT_LE(r.flipped_max_sd, f64::kLambda)
        << kPaths[i].name << ": " << r.flipped << " ReLU decisions differ from float64's";
  }
}

}  // namespace
