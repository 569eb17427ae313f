// Op table rows (op_table.h) of tandem/transformer_ops.h, with the float64 references of
// tests/core/transformer_reference.h where it has them.
#include "core/transformer_reference.h"
#include "ops/op_table.h"
#include "tandem/transformer_ops.h"

namespace tandem::testing::op_table {

using ops::Op;

namespace {


// y = x w + b for x [n, k], w [k, m] (linear_in_out) or w [m, k] (`transposed`, linear).
std::vector<double> affine(const Values& v, int64_t n, int64_t k, int64_t m, bool transposed) {
  const std::vector<double>& w = v.at("w");
  std::vector<double> y = matmul(v.at("x"), n, k, m, [&](int64_t l, int64_t j) {
    return transposed ? w[static_cast<size_t>(j * k + l)] : w[static_cast<size_t>(l * m + j)];
  });
  if (v.count("b"))
    for (int64_t i = 0; i < n * m; ++i) y[static_cast<size_t>(i)] += v.at("b")[static_cast<size_t>(i % m)];
  return y;
}

}  // namespace

std::vector<Row> transformer_rows() {
  std::vector<Row> rows;
  const ref::AttentionDims att{2, 5, 8, 2};
  rows.push_back({Op::embedding_forward,
                  {in("tokens", {2, 3}, ints(0, 5), Kind::i64), in("wte", {5, 4}, uniform(-1, 1)),
                   in("wpe", {4, 4}, uniform(-1, 1)), out("y", {2, 3, 4})},
                  nullptr,
                  [](const Call& c) { ops::embedding_forward(c["tokens"], c["wte"], c["wpe"], c["y"]); },
                  [](Values& v, DType) {
                    for (size_t i = 0; i < v["y"].size(); ++i) {
                      const size_t pos = i / 4, t = pos % 3, ch = i % 4;
                      const auto tok = static_cast<size_t>(v["tokens"][pos]);
                      v["y"][i] = v["wte"][tok * 4 + ch] + v["wpe"][t * 4 + ch];
                    }
                  },
                  kTolF32, kTolBf16, kTolF16});
  rows.push_back({Op::embedding_backward,
                  {in("dy", {2, 3, 4}, uniform(-1, 1)), in("tokens", {2, 3}, ints(0, 5), Kind::i64),
                   inout("dwte", {5, 4}, uniform(-1, 1), Kind::f32), inout("dwpe", {4, 4}, uniform(-1, 1), Kind::f32)},
                  nullptr,
                  [](const Call& c) { ops::embedding_backward(c["dy"], c["tokens"], c["dwte"], c["dwpe"], true); },
                  [](Values& v, DType) {
                    for (size_t i = 0; i < v["dy"].size(); ++i) {
                      const size_t pos = i / 4, t = pos % 3, ch = i % 4;
                      v["dwte"][static_cast<size_t>(v["tokens"][pos]) * 4 + ch] += v["dy"][i];
                      v["dwpe"][t * 4 + ch] += v["dy"][i];
                    }
                  },
                  kSumF32, kSumF32, kSumF32});
  rows.push_back({Op::layer_norm_forward,
                  {in("x", {3, 8}, uniform(-2, 2)), in("gamma", {8}, uniform(0.5, 1.5), Kind::f32),
                   in("beta", {8}, uniform(-1, 1), Kind::f32), out("y", {3, 8}), out("mean", {3}, Kind::f32),
                   out("rstd", {3}, Kind::f32)},
                  nullptr,
                  [](const Call& c) {
                    ops::layer_norm_forward(c["x"], c["gamma"], c["beta"], 1e-5f, c["y"], c["mean"], c["rstd"]);
                  },
                  [](Values& v, DType) {
                    ref::LayerNormOut o = ref::layer_norm(v["x"], v["gamma"], v["beta"], 3, 8, double(1e-5f));
                    v["y"] = o.y, v["mean"] = o.mean, v["rstd"] = o.rstd;
                  },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::layer_norm_backward,
                  {in("dy", {3, 8}, uniform(-1, 1)), in("x", {3, 8}, uniform(-2, 2)),
                   in("gamma", {8}, uniform(0.5, 1.5), Kind::f32), in("mean", {3}, constant(0), Kind::f32),
                   in("rstd", {3}, constant(0), Kind::f32), out("dx", {3, 8}),
                   inout("dgamma", {8}, uniform(-1, 1), Kind::f32), inout("dbeta", {8}, uniform(-1, 1), Kind::f32)},
                  [](Values& v) {  // the forward's statistics of x
                    ref::LayerNormOut o = ref::layer_norm(v["x"], v["gamma"], {}, 3, 8, double(1e-5f));
                    v["mean"] = o.mean, v["rstd"] = o.rstd;
                  },
                  [](const Call& c) {
                    ops::layer_norm_backward(c["dy"], c["x"], c["gamma"], c["mean"], c["rstd"], c["dx"], c["dgamma"],
                                             c["dbeta"], true);
                  },
                  [](Values& v, DType) {
                    ref::LayerNormGrad g = ref::layer_norm_backward(v["dy"], v["x"], v["gamma"], 3, 8, double(1e-5f));
                    v["dx"] = g.dx;
                    store(v["dgamma"], g.dgamma, true), store(v["dbeta"], g.dbeta, true);
                  },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::gelu_forward,
                  {in("x", {4, 8}, uniform(-4, 4)), out("y", {4, 8})},
                  nullptr,
                  [](const Call& c) { ops::gelu_forward(c["x"], c["y"]); },
                  [](Values& v, DType) {
                    for (size_t i = 0; i < v["x"].size(); ++i) v["y"][i] = ref::gelu(v["x"][i]);
                  },
                  kTolF32, kTolBf16, kTolF16});
  rows.push_back({Op::gelu_backward,
                  {in("dy", {4, 8}, uniform(-1, 1)), in("x", {4, 8}, uniform(-4, 4)), out("dx", {4, 8})},
                  nullptr,
                  [](const Call& c) { ops::gelu_backward(c["dy"], c["x"], c["dx"]); },
                  [](Values& v, DType) {
                    for (size_t i = 0; i < v["x"].size(); ++i) v["dx"][i] = v["dy"][i] * ref::gelu_grad(v["x"][i]);
                  },
                  kTolF32, kTolBf16, kTolF16});
  rows.push_back({Op::add_forward,
                  {in("a", {4, 8}, uniform(-1, 1)), in("b", {4, 8}, uniform(-1, 1)), out("y", {4, 8})},
                  nullptr,
                  [](const Call& c) { ops::add_forward(c["a"], c["b"], c["y"]); },
                  [](Values& v, DType) {
                    for (size_t i = 0; i < v["a"].size(); ++i) v["y"][i] = v["a"][i] + v["b"][i];
                  },
                  kTolF32, kTolBf16, kTolF16});
  rows.push_back({Op::attention_forward,
                  {in("qkv", {2, 5, 24}, uniform(-1, 1)), out("y", {2, 5, 8}), out("lse", {2, 2, 5}, Kind::f32)},
                  nullptr,
                  [](const Call& c) { ops::attention_forward(c["qkv"], 2, c["y"], c["lse"]); },
                  [att](Values& v, DType) {
                    ref::AttentionOut o = ref::attention(v["qkv"], att);
                    v["y"] = o.y, v["lse"] = o.lse;
                  },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::attention_backward,
                  {in("dy", {2, 5, 8}, uniform(-1, 1)), in("qkv", {2, 5, 24}, uniform(-1, 1)),
                   in("y", {2, 5, 8}, constant(0)), in("lse", {2, 2, 5}, constant(0), Kind::f32),
                   out("dqkv", {2, 5, 24})},
                  [att](Values& v) {  // the forward's y and lse
                    ref::AttentionOut o = ref::attention(v["qkv"], att);
                    v["y"] = o.y, v["lse"] = o.lse;
                  },
                  [](const Call& c) { ops::attention_backward(c["dy"], c["qkv"], c["y"], c["lse"], 2, c["dqkv"]); },
                  [att](Values& v, DType) { v["dqkv"] = ref::attention_backward(v["dy"], v["qkv"], att); },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::classifier_cross_entropy,
                  {in("h", {6, 8}, uniform(-1, 1)), in("w", {10, 8}, uniform(-1, 1)),
                   in("targets", {6}, values({3, -1, 7, 0, 12, 9}), Kind::i64), out("dh", {6, 8}),
                   inout("dw", {10, 8}, uniform(-1, 1), Kind::f32), inout("metrics", {4}, constant(1), Kind::f32)},
                  nullptr,
                  [](const Call& c) {
                    ops::classifier_cross_entropy(c["h"], c["w"], c["targets"], -1, 2.0f, c["dh"], c["dw"], true,
                                                  c["metrics"]);
                  },
                  [](Values& v, DType) {  // target -1 is ignore_index, 12 is outside [0, 10)
                    std::vector<int64_t> tgt(v["targets"].begin(), v["targets"].end());
                    ref::ClassifierOut o = ref::classifier(v["h"], v["w"], tgt, 6, 8, 10);
                    for (double& g : o.dh) g *= 2.0;
                    for (double& g : o.dw) g *= 2.0;
                    v["dh"] = o.dh;
                    store(v["dw"], o.dw, true);
                    std::vector<double>& m = v["metrics"];
                    m[0] += o.loss * double(o.counted), m[1] += double(o.correct), m[2] += double(o.counted), m[3] += 1;
                  },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::linear_in_out_forward,
                  {in("x", {3, 5}, uniform(-1, 1)), in("w", {5, 4}, uniform(-1, 1)),
                   in("b", {4}, uniform(-1, 1), Kind::f32), out("y", {3, 4})},
                  nullptr,
                  [](const Call& c) { ops::linear_in_out_forward(c["x"], c["w"], c["b"], c["y"]); },
                  [](Values& v, DType) { v["y"] = affine(v, 3, 5, 4, false); },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::linear_in_out_backward_data,
                  {in("dy", {3, 4}, uniform(-1, 1)), in("w", {5, 4}, uniform(-1, 1)), out("dx", {3, 5})},
                  nullptr,
                  [](const Call& c) { ops::linear_in_out_backward_data(c["dy"], c["w"], c["dx"]); },
                  [](Values& v, DType) {  // dx = dy w^T
                    const std::vector<double>& w = v["w"];
                    v["dx"] = matmul(v["dy"], 3, 4, 5, [&](int64_t l, int64_t j) { return w[size_t(j * 4 + l)]; });
                  },
                  kSumF32, kSumBf16, kSumF16});
  rows.push_back({Op::linear_in_out_backward_weights,
                  {in("x", {3, 5}, uniform(-1, 1)), in("dy", {3, 4}, uniform(-1, 1)),
                   inout("dw", {5, 4}, uniform(-1, 1), Kind::f32), inout("db", {4}, uniform(-1, 1), Kind::f32)},
                  nullptr,
                  [](const Call& c) { ops::linear_in_out_backward_weights(c["x"], c["dy"], c["dw"], c["db"], true); },
                  [](Values& v, DType) {  // dw = x^T dy, db = sum over rows of dy
                    std::vector<double> xt(15);
                    for (int64_t i = 0; i < 15; ++i) xt[size_t(i % 5 * 3 + i / 5)] = v["x"][size_t(i)];
                    const std::vector<double>& dy = v["dy"];
                    store(v["dw"], matmul(xt, 5, 3, 4, [&](int64_t l, int64_t j) { return dy[size_t(l * 4 + j)]; }),
                          true);
                    for (size_t i = 0; i < dy.size(); ++i) v["db"][i % 4] += dy[i];
                  },
                  kSumF32, kSumBf16, kSumF16});
  return rows;
}

// Shared with the image rows (linear_forward and its backward use w [out, in]).
std::vector<double> linear_reference(const Values& v, int64_t n, int64_t k, int64_t m) {
  return affine(v, n, k, m, true);
}

}  // namespace tandem::testing::op_table
