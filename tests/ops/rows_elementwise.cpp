// Op table rows (op_table.h) of the element-wise ops and the softmax cross-entropy of
// tandem/ops.h, with float64 references (dropout's mask drawn from tandem::Philox as documented).
#include <algorithm>
#include <cmath>

#include "ops/op_table.h"
#include "tandem/ops.h"

namespace tandem::testing::op_table {

using ops::Op;

namespace {


// The loss rows: logits [4, 6], label smoothing 0.1.
constexpr size_t kRows = 4, kClasses = 6;
constexpr double kSmooth = double(0.1f);

// Softmax of row n of v["logits"].
std::vector<double> softmax_row(const Values& v, size_t n) {
  const std::vector<double>& z = v.at("logits");
  const double m = *std::max_element(z.begin() + long(n * kClasses), z.begin() + long((n + 1) * kClasses));
  std::vector<double> p(kClasses);
  double s = 0;
  for (size_t c = 0; c < kClasses; ++c) s += p[c] = std::exp(z[n * kClasses + c] - m);
  for (double& x : p) x /= s;
  return p;
}

// Row n's loss -sum_c q_c log p_c, q = (1 - e) onehot(label) + e / C (only the e / C term when
// the label is outside [0, C)); writes the row's probabilities to v["probs"].
double loss_row(Values& v, size_t n) {
  const std::vector<double> p = softmax_row(v, n);
  const double label = v["labels"][n];
  double loss = 0;
  for (size_t c = 0; c < kClasses; ++c) {
    v["probs"][n * kClasses + c] = p[c];
    loss -= (kSmooth / kClasses + (double(c) == label ? 1 - kSmooth : 0.0)) * std::log(p[c]);
  }
  return loss;
}

bool argmax_is_label(const Values& v, size_t n) {
  const auto* z = &v.at("logits")[n * kClasses];
  return double(std::max_element(z, z + kClasses) - z) == v.at("labels")[n];  // the first maximum
}

// Element-wise rows of one input x [4, 8] and an output `y`: y[i] = f(x[i]).
template <typename F>
void each(Values& v, const char* x, const char* y, F f) {
  for (size_t i = 0; i < v[x].size(); ++i) v[y][i] = f(i, v[x][i]);
}

}  // namespace

std::vector<Row> elementwise_rows() {
  std::vector<Row> rows;
  rows.push_back({Op::relu_forward, {in("x", {4, 8}, uniform(-1, 1)), out("y", {4, 8})}, nullptr,
                  [](const Call& c) { ops::relu_forward(c["x"], c["y"]); },
                  [](Values& v, DType) { each(v, "x", "y", [](size_t, double x) { return std::max(x, 0.0); }); },
                  kTolF32, kTolF32, kTolF32});
  rows.push_back({Op::relu_backward,
                  {in("dy", {4, 8}, uniform(-1, 1)), in("y", {4, 8}, uniform(-1, 1)), out("dx", {4, 8})},
                  nullptr,
                  [](const Call& c) { ops::relu_backward(c["dy"], c["y"], c["dx"]); },
                  [](Values& v, DType) {
                    each(v, "dy", "dx", [&](size_t i, double dy) { return v["y"][i] > 0 ? dy : 0.0; });
                  },
                  kTolF32, kTolF32, kTolF32});
  rows.push_back({Op::add_relu_forward,
                  {in("a", {4, 8}, uniform(-1, 1)), in("b", {4, 8}, uniform(-1, 1)), out("y", {4, 8})},
                  nullptr,
                  [](const Call& c) { ops::add_relu_forward(c["a"], c["b"], c["y"]); },
                  [](Values& v, DType) {
                    each(v, "a", "y", [&](size_t i, double a) { return std::max(a + v["b"][i], 0.0); });
                  },
                  kTolF32, kTolBf16, kTolF16});
  rows.push_back({Op::dropout_forward,
                  {in("x", {4, 8}, uniform(-1, 1)), out("y", {4, 8}), out("mask", {4, 8}, Kind::u8)},
                  nullptr,
                  [](const Call& c) { ops::dropout_forward(c["x"], 0.25f, 7, 3, c["y"], c["mask"]); },
                  [](Values& v, DType) {  // mask[i] = (the i-th uniform of Philox(seed, counter) >= p)
                    Philox rng(7, 3);
                    for (size_t i = 0; i < v["x"].size(); ++i) {
                      v["mask"][i] = rng.uniform() >= 0.25f ? 1 : 0;
                      v["y"][i] = v["x"][i] * v["mask"][i] / 0.75;
                    }
                  },
                  kTolF32, kTolBf16, kTolF16});
  rows.push_back({Op::dropout_backward,
                  {in("dy", {4, 8}, uniform(-1, 1)), in("mask", {4, 8}, ints(0, 2), Kind::u8), out("dx", {4, 8})},
                  nullptr,
                  [](const Call& c) { ops::dropout_backward(c["dy"], c["mask"], 0.25f, c["dx"]); },
                  [](Values& v, DType) {
                    each(v, "dy", "dx", [&](size_t i, double dy) { return dy * v["mask"][i] / 0.75; });
                  },
                  kTolF32, kTolBf16, kTolF16});
  rows.push_back({Op::add_,
                  {inout("dst", {4, 8}, uniform(-1, 1)), in("src", {4, 8}, uniform(-1, 1))},
                  nullptr,
                  [](const Call& c) { ops::add_(c["dst"], c["src"], 0.5f); },
                  [](Values& v, DType) {
                    each(v, "dst", "dst", [&](size_t i, double d) { return d + 0.5 * v["src"][i]; });
                  },
                  kTolF32, kTolBf16, kTolF16});
  rows.push_back({Op::scale_, {inout("dst", {4, 8}, uniform(-1, 1))}, nullptr,
                  [](const Call& c) { ops::scale_(c["dst"], -1.5f); },
                  [](Values& v, DType) { each(v, "dst", "dst", [](size_t, double d) { return -1.5 * d; }); },
                  kTolF32, kTolBf16, kTolF16});
  rows.push_back({Op::zero_, {inout("dst", {4, 8}, uniform(-1, 1))}, nullptr,
                  [](const Call& c) { ops::zero_(c["dst"]); },
                  [](Values& v, DType) { v["dst"].assign(v["dst"].size(), 0.0); }, kTolF32, kTolF32, kTolF32});
  rows.push_back({Op::softmax_cross_entropy_forward,
                  {in("logits", {4, 6}, uniform(-3, 3)), in("labels", {4}, ints(0, 6), Kind::i64),
                   out("probs", {4, 6}, Kind::f32), scalar("loss")},
                  nullptr,
                  [](const Call& c) {
                    c.set("loss", ops::softmax_cross_entropy_forward(c["logits"], c["labels"], 0.1f, c["probs"]));
                  },
                  [](Values& v, DType) {
                    double loss = 0;
                    for (size_t n = 0; n < kRows; ++n) loss += loss_row(v, n) / kRows;
                    v["loss"] = {loss};
                  },
                  kSumF32, kSumF32, kSumF32});
  rows.push_back({Op::softmax_cross_entropy_backward,
                  {in("probs", {4, 6}, uniform(0, 1), Kind::f32), in("labels", {4}, ints(0, 6), Kind::i64),
                   out("dlogits", {4, 6})},
                  nullptr,
                  [](const Call& c) {
                    ops::softmax_cross_entropy_backward(c["probs"], c["labels"], 0.1f, 2.0f, c["dlogits"]);
                  },
                  [](Values& v, DType) {  // (probs - q) * grad_loss / N
                    each(v, "probs", "dlogits", [&](size_t i, double p) {
                      const bool hit = double(i % kClasses) == v["labels"][i / kClasses];
                      const double q = kSmooth / kClasses + (hit ? 1 - kSmooth : 0);
                      return (p - q) * 2.0 / kRows;
                    });
                  },
                  kTolF32, kTolBf16, kTolF16});
  rows.push_back({Op::count_correct,
                  {in("logits", {4, 6}, uniform(-3, 3)), in("labels", {4}, values({0, 1, 2, 3}), Kind::i64),
                   scalar("correct")},
                  [](Values& v) {  // rows 0 and 2 right, 1 and 3 wrong
                    for (size_t n = 0; n < kRows; ++n) v["labels"][n] = double(n % 2 ? 0 : 1);
                    for (size_t n = 0; n < kRows; ++n) v["logits"][n * kClasses + 1] = n % 2 ? -3 : 3;
                  },
                  [](const Call& c) { c.set("correct", double(ops::count_correct(c["logits"], c["labels"]))); },
                  [](Values& v, DType) {
                    double k = 0;
                    for (size_t n = 0; n < kRows; ++n) k += argmax_is_label(v, n) ? 1 : 0;
                    v["correct"] = {k};
                  },
                  kTolF32, kTolF32, kTolF32});
  rows.push_back({Op::softmax_cross_entropy_accumulate,
                  {in("logits", {4, 6}, uniform(-3, 3)), in("labels", {4}, values({2, 5, 9, 0}), Kind::i64),
                   out("probs", {4, 6}, Kind::f32), inout("metrics", {4}, constant(1), Kind::f32)},
                  nullptr,
                  [](const Call& c) {
                    ops::softmax_cross_entropy_accumulate(c["logits"], c["labels"], 0.1f, c["probs"], c["metrics"]);
                  },
                  [](Values& v, DType) {  // label 9 is outside [0, 6): counted in metrics[3]
                    std::vector<double>& m = v["metrics"];
                    for (size_t n = 0; n < kRows; ++n) {
                      m[0] += loss_row(v, n);
                      m[1] += argmax_is_label(v, n) ? 1 : 0;
                      m[3] += v["labels"][n] >= double(kClasses) ? 1 : 0;
                    }
                    m[2] += kRows;
                  },
                  kSumF32, kSumF32, kSumF32});
  return rows;
}

}  // namespace tandem::testing::op_table
