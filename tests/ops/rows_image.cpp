// Op table rows (op_table.h) of the image ops of tandem/ops.h: convolution, the linear layer,
// batch norm and pooling, with plain-loop float64 references (NCHW).
#include <cmath>

#include "ops/op_table.h"
#include "tandem/ops.h"

namespace tandem::testing::op_table {

using ops::Op;

namespace {


// The convolution of the rows: x [2, 3, 6, 6], w [4, 3, 3, 3], stride 2, padding 1 -> y [2, 4, 3, 3].
constexpr int64_t kN = 2, kC = 3, kH = 6, kK = 4, kR = 3, kP = 3;
const ops::Conv2dParams kConv{2, 2, 1, 1};

// Calls f(x index, w index, y index) for every product of the convolution.
template <typename F>
void conv_products(F f) {
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t k = 0; k < kK; ++k)
      for (int64_t p = 0; p < kP; ++p)
        for (int64_t q = 0; q < kP; ++q)
          for (int64_t c = 0; c < kC; ++c)
            for (int64_t r = 0; r < kR; ++r)
              for (int64_t s = 0; s < kR; ++s) {
                const int64_t h = p * 2 - 1 + r, w = q * 2 - 1 + s;
                if (h < 0 || h >= kH || w < 0 || w >= kH) continue;
                f(size_t(((n * kC + c) * kH + h) * kH + w), size_t(((k * kC + c) * kR + r) * kR + s),
                  size_t(((n * kK + k) * kP + p) * kP + q));
              }
}

// Batch norm of the rows: x [2, 3, 2, 2], statistics over (N, H, W) per channel (4 * 2 values).
constexpr int64_t kBnC = 3, kBnHW = 4, kBnM = 8;
constexpr double kEps = 1e-5;
size_t bn_channel(size_t i) { return i / kBnHW % kBnC; }
// Per channel: the mean and the biased variance of v["x"].
void bn_stats(const Values& v, std::vector<double>& mean, std::vector<double>& var) {
  mean.assign(kBnC, 0), var.assign(kBnC, 0);
  const std::vector<double>& x = v.at("x");
  for (size_t i = 0; i < x.size(); ++i) mean[bn_channel(i)] += x[i] / kBnM;
  for (size_t i = 0; i < x.size(); ++i) var[bn_channel(i)] += std::pow(x[i] - mean[bn_channel(i)], 2) / kBnM;
}

}  // namespace

std::vector<Row> image_rows() {
  std::vector<Row> rows;
  rows.push_back({Op::conv2d_forward,
                  {in("x", {2, 3, 6, 6}, uniform(-1, 1)), in("w", {4, 3, 3, 3}, uniform(-1, 1)),
                   in("b", {4}, uniform(-1, 1), Kind::f32), out("y", {2, 4, 3, 3})},
                  nullptr,
                  [](const Call& c) { ops::conv2d_forward(c["x"], c["w"], c["b"], kConv, c["y"]); },
                  [](Values& v, DType) {
                    std::vector<double>& y = v["y"];
                    for (size_t i = 0; i < y.size(); ++i) y[i] = v["b"][i / 9 % 4];
                    conv_products([&](size_t x, size_t w, size_t yi) { y[yi] += v["x"][x] * v["w"][w]; });
                  },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::conv2d_backward_data,
                  {in("dy", {2, 4, 3, 3}, uniform(-1, 1)), in("w", {4, 3, 3, 3}, uniform(-1, 1)),
                   out("dx", {2, 3, 6, 6})},
                  nullptr,
                  [](const Call& c) { ops::conv2d_backward_data(c["dy"], c["w"], kConv, c["dx"]); },
                  [](Values& v, DType) {
                    std::vector<double>& dx = v["dx"];
                    dx.assign(dx.size(), 0.0);
                    conv_products([&](size_t x, size_t w, size_t y) { dx[x] += v["dy"][y] * v["w"][w]; });
                  },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::conv2d_backward_weights,
                  {in("x", {2, 3, 6, 6}, uniform(-1, 1)), in("dy", {2, 4, 3, 3}, uniform(-1, 1)),
                   inout("dw", {4, 3, 3, 3}, uniform(-1, 1), Kind::f32), inout("db", {4}, uniform(-1, 1), Kind::f32)},
                  nullptr,
                  [](const Call& c) { ops::conv2d_backward_weights(c["x"], c["dy"], kConv, c["dw"], c["db"], true); },
                  [](Values& v, DType) {
                    conv_products([&](size_t x, size_t w, size_t y) { v["dw"][w] += v["x"][x] * v["dy"][y]; });
                    for (size_t i = 0; i < v["dy"].size(); ++i) v["db"][i / 9 % 4] += v["dy"][i];
                  },
                  kSumF32, kSumF32, kSumF32});
  rows.push_back({Op::linear_forward,
                  {in("x", {3, 5}, uniform(-1, 1)), in("w", {4, 5}, uniform(-1, 1)),
                   in("b", {4}, uniform(-1, 1), Kind::f32), out("y", {3, 4})},
                  nullptr,
                  [](const Call& c) { ops::linear_forward(c["x"], c["w"], c["b"], c["y"]); },
                  [](Values& v, DType) { v["y"] = linear_reference(v, 3, 5, 4); },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::linear_backward_data,
                  {in("dy", {3, 4}, uniform(-1, 1)), in("w", {4, 5}, uniform(-1, 1)), out("dx", {3, 5})},
                  nullptr,
                  [](const Call& c) { ops::linear_backward_data(c["dy"], c["w"], c["dx"]); },
                  [](Values& v, DType) {  // dx = dy w
                    const std::vector<double>& w = v["w"];
                    v["dx"] = matmul(v["dy"], 3, 4, 5, [&](int64_t l, int64_t j) { return w[size_t(l * 5 + j)]; });
                  },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::linear_backward_weights,
                  {in("x", {3, 5}, uniform(-1, 1)), in("dy", {3, 4}, uniform(-1, 1)),
                   inout("dw", {4, 5}, uniform(-1, 1), Kind::f32), inout("db", {4}, uniform(-1, 1), Kind::f32)},
                  nullptr,
                  [](const Call& c) { ops::linear_backward_weights(c["x"], c["dy"], c["dw"], c["db"], true); },
                  [](Values& v, DType) {  // dw = dy^T x, db = sum over rows of dy
                    for (size_t o = 0; o < 4; ++o)
                      for (size_t i = 0; i < 5; ++i)
                        for (size_t n = 0; n < 3; ++n) v["dw"][o * 5 + i] += v["dy"][n * 4 + o] * v["x"][n * 5 + i];
                    for (size_t i = 0; i < v["dy"].size(); ++i) v["db"][i % 4] += v["dy"][i];
                  },
                  kSumF32, kSumF32, kSumF32});
  rows.push_back({Op::batch_norm_forward_training,
                  {in("x", {2, 3, 2, 2}, uniform(-2, 2)), in("gamma", {3}, uniform(0.5, 1.5), Kind::f32),
                   in("beta", {3}, uniform(-1, 1), Kind::f32), out("y", {2, 3, 2, 2}),
                   out("save_mean", {3}, Kind::f32), out("save_var", {3}, Kind::f32),
                   inout("running_mean", {3}, uniform(-1, 1), Kind::f32),
                   inout("running_var", {3}, uniform(0.5, 1.5), Kind::f32)},
                  nullptr,
                  [](const Call& c) {
                    ops::batch_norm_forward_training(c["x"], c["gamma"], c["beta"], kEps, 0.1, c["y"], c["save_mean"],
                                                     c["save_var"], c["running_mean"], c["running_var"]);
                  },
                  [](Values& v, DType) {
                    std::vector<double> mean, var;
                    bn_stats(v, mean, var);
                    for (size_t i = 0; i < v["x"].size(); ++i) {
                      const size_t c = bn_channel(i);
                      v["y"][i] = (v["x"][i] - mean[c]) / std::sqrt(var[c] + kEps) * v["gamma"][c] + v["beta"][c];
                    }
                    for (size_t c = 0; c < kBnC; ++c) {
                      v["running_mean"][c] = 0.9 * v["running_mean"][c] + 0.1 * mean[c];
                      v["running_var"][c] = 0.9 * v["running_var"][c] + 0.1 * var[c] * kBnM / (kBnM - 1);
                    }
                    v["save_mean"] = mean, v["save_var"] = var;
                  },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::batch_norm_forward_inference,
                  {in("x", {2, 3, 2, 2}, uniform(-2, 2)), in("gamma", {3}, uniform(0.5, 1.5), Kind::f32),
                   in("beta", {3}, uniform(-1, 1), Kind::f32), in("running_mean", {3}, uniform(-1, 1), Kind::f32),
                   in("running_var", {3}, uniform(0.5, 1.5), Kind::f32), out("y", {2, 3, 2, 2})},
                  nullptr,
                  [](const Call& c) {  // with the fused ReLU
                    ops::batch_norm_forward_inference(c["x"], c["gamma"], c["beta"], c["running_mean"],
                                                      c["running_var"], kEps, c["y"], true);
                  },
                  [](Values& v, DType) {
                    for (size_t i = 0; i < v["x"].size(); ++i) {
                      const size_t c = bn_channel(i);
                      const double y = (v["x"][i] - v["running_mean"][c]) / std::sqrt(v["running_var"][c] + kEps) *
                                           v["gamma"][c] + v["beta"][c];
                      v["y"][i] = std::max(y, 0.0);
                    }
                  },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::batch_norm_backward,
                  {in("dy", {2, 3, 2, 2}, uniform(-1, 1)), in("x", {2, 3, 2, 2}, uniform(-2, 2)),
                   in("gamma", {3}, uniform(0.5, 1.5), Kind::f32), in("save_mean", {3}, constant(0), Kind::f32),
                   in("save_var", {3}, constant(1), Kind::f32), out("dx", {2, 3, 2, 2}),
                   inout("dgamma", {3}, uniform(-1, 1), Kind::f32), inout("dbeta", {3}, uniform(-1, 1), Kind::f32)},
                  [](Values& v) { bn_stats(v, v["save_mean"], v["save_var"]); },  // the forward's statistics
                  [](const Call& c) {
                    ops::batch_norm_backward(c["dy"], c["x"], c["gamma"], c["save_mean"], c["save_var"], kEps, c["dx"],
                                             c["dgamma"], c["dbeta"], true);
                  },
                  [](Values& v, DType) {  // dx = gamma rstd (dy - sum(dy) / M - xhat sum(dy xhat) / M)
                    std::vector<double> sdy(kBnC, 0), sdyx(kBnC, 0), xhat(v["x"].size());
                    for (size_t i = 0; i < xhat.size(); ++i) {
                      const size_t c = bn_channel(i);
                      xhat[i] = (v["x"][i] - v["save_mean"][c]) / std::sqrt(v["save_var"][c] + kEps);
                      sdy[c] += v["dy"][i], sdyx[c] += v["dy"][i] * xhat[i];
                    }
                    for (size_t i = 0; i < xhat.size(); ++i) {
                      const size_t c = bn_channel(i);
                      v["dx"][i] = v["gamma"][c] / std::sqrt(v["save_var"][c] + kEps) *
                                   (v["dy"][i] - sdy[c] / kBnM - xhat[i] * sdyx[c] / kBnM);
                    }
                    store(v["dgamma"], sdyx, true), store(v["dbeta"], sdy, true);
                  },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::max_pool2d_forward,
                  {in("x", {2, 3, 5, 5}, uniform(-1, 1)), out("y", {2, 3, 3, 3}),
                   out("indices", {2, 3, 3, 3}, Kind::i32)},
                  nullptr,
                  [](const Call& c) { ops::max_pool2d_forward(c["x"], {3, 3, 2, 2, 1, 1}, c["y"], c["indices"]); },
                  [](Values& v, DType) {  // kernel 3, stride 2, padding 1: the first maximum in window order
                    for (size_t o = 0; o < v["y"].size(); ++o) {
                      const size_t plane = o / 9;
                      const int64_t p = int64_t(o % 9 / 3), q = int64_t(o % 3);
                      double best = -INFINITY;
                      int64_t at = -1;
                      for (int64_t h = p * 2 - 1; h <= p * 2 + 1; ++h)
                        for (int64_t w = q * 2 - 1; w <= q * 2 + 1; ++w) {
                          if (h < 0 || h >= 5 || w < 0 || w >= 5) continue;
                          const double x = v["x"][plane * 25 + size_t(h * 5 + w)];
                          if (x > best) best = x, at = h * 5 + w;
                        }
                      v["y"][o] = best, v["indices"][o] = double(at);
                    }
                  },
                  kTolF32, kTolF32, kTolF32});
  rows.push_back({Op::max_pool2d_backward,
                  {in("dy", {2, 3, 2, 2}, uniform(-1, 1)), in("indices", {2, 3, 2, 2}, constant(0), Kind::i32),
                   out("dx", {2, 3, 4, 4})},
                  [](Values& v) {  // a position inside each 2x2 window
                    for (size_t o = 0; o < v["indices"].size(); ++o) {
                      const size_t p = o % 4 / 2, q = o % 2, a = o * 7 % 4;
                      v["indices"][o] = double((2 * p + a / 2) * 4 + 2 * q + a % 2);
                    }
                  },
                  [](const Call& c) { ops::max_pool2d_backward(c["dy"], c["indices"], {2, 2, 2, 2, 0, 0}, c["dx"]); },
                  [](Values& v, DType) {
                    v["dx"].assign(v["dx"].size(), 0.0);
                    for (size_t o = 0; o < v["dy"].size(); ++o)
                      v["dx"][o / 4 * 16 + size_t(v["indices"][o])] += v["dy"][o];
                  },
                  kTolF32, kTolF32, kTolF32});
  rows.push_back({Op::global_avg_pool2d_forward,
                  {in("x", {2, 3, 4, 4}, uniform(-1, 1)), out("y", {2, 3, 1, 1})},
                  nullptr,
                  [](const Call& c) { ops::global_avg_pool2d_forward(c["x"], c["y"]); },
                  [](Values& v, DType) {
                    v["y"].assign(6, 0.0);
                    for (size_t i = 0; i < v["x"].size(); ++i) v["y"][i / 16] += v["x"][i] / 16;
                  },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::global_avg_pool2d_backward,
                  {in("dy", {2, 3, 1, 1}, uniform(-1, 1)), out("dx", {2, 3, 4, 4})},
                  nullptr,
                  [](const Call& c) { ops::global_avg_pool2d_backward(c["dy"], c["dx"]); },
                  [](Values& v, DType) {
                    for (size_t i = 0; i < v["dx"].size(); ++i) v["dx"][i] = v["dy"][i / 16] / 16;
                  },
                  kTolF32, kTolBf16, kTolF16});
  return rows;
}

}  // namespace tandem::testing::op_table
