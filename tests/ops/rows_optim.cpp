// Op table rows (op_table.h) of tandem/optim_ops.h and tandem/amp_ops.h: the optimizer steps
// and the loss scaler's device steps, with float64 references from PyTorch's formulas.
#include <cmath>

#include "ops/op_table.h"
#include "tandem/amp_ops.h"
#include "tandem/ops.h"
#include "tandem/optim_ops.h"

namespace tandem::testing::op_table {

using ops::Op;

namespace {

constexpr Tol kStepF32{1e-6, 1e-5};

ops::AdamParams adamw() {
  ops::AdamParams p;
  p.lr = 1e-2, p.weight_decay = 0.01, p.decoupled = true, p.step = 3;
  return p;
}

ops::SgdParams sgd_nesterov() {
  ops::SgdParams p;
  p.lr = 0.1, p.momentum = 0.9, p.weight_decay = 0.01, p.nesterov = true;
  return p;
}

void scale_all(std::vector<double>& g, double s) {
  for (double& x : g) x *= s;
}

}  // namespace

std::vector<Row> optim_rows() {
  std::vector<Row> rows;
  rows.push_back({Op::adam_step,
                  {inout("param", {16}, uniform(-1, 1)), in("grad", {16}, uniform(-1, 1)),
                   inout("exp_avg", {16}, uniform(-0.1, 0.1)), inout("exp_avg_sq", {16}, uniform(0, 0.01)),
                   out("out", {16}, Kind::bf16)},
                  nullptr,
                  [](const Call& c) {
                    ops::adam_step(c["param"], c["grad"], c["exp_avg"], c["exp_avg_sq"], adamw(), c["out"]);
                  },
                  [](Values& v, DType) {  // AdamW (torch.optim.AdamW), the bf16 copy of the result in `out`
                    const ops::AdamParams a = adamw();
                    const double bc1 = 1 - std::pow(a.beta1, 3), bc2 = 1 - std::pow(a.beta2, 3);
                    for (size_t i = 0; i < 16; ++i) {
                      double& p = v["param"][i];
                      const double g = v["grad"][i];
                      double& m = v["exp_avg"][i];
                      double& s = v["exp_avg_sq"][i];
                      p *= 1 - a.lr * a.weight_decay;
                      m = a.beta1 * m + (1 - a.beta1) * g;
                      s = a.beta2 * s + (1 - a.beta2) * g * g;
                      p -= a.lr / bc1 * m / (std::sqrt(s) / std::sqrt(bc2) + a.eps);
                      v["out"][i] = p;
                    }
                  },
                  kStepF32, kTolBf16, kTolF16});
  rows.push_back({Op::sgd_step,
                  {inout("param", {16}, uniform(-1, 1)), in("grad", {16}, uniform(-1, 1)),
                   inout("momentum_buffer", {16}, uniform(-1, 1))},
                  nullptr,
                  [](const Call& c) {
                    ops::sgd_step(c["param"], c["grad"], c["momentum_buffer"], sgd_nesterov(), Tensor());
                  },
                  [](Values& v, DType) {  // torch.optim.SGD, dampening 0
                    const ops::SgdParams s = sgd_nesterov();
                    for (size_t i = 0; i < 16; ++i) {
                      double& p = v["param"][i];
                      double& buf = v["momentum_buffer"][i];
                      const double d = v["grad"][i] + s.weight_decay * p;
                      buf = s.momentum * buf + d;
                      p -= s.lr * (d + s.momentum * buf);
                    }
                  },
                  kStepF32, kStepF32, kStepF32});
  rows.push_back({Op::amp_scale,
                  {in("src", {16}, uniform(-1, 1), Kind::f32), in("state", {4}, values({1024, 3, 0, 2}), Kind::f32),
                   out("dst", {16})},
                  nullptr,
                  [](const Call& c) { ops::amp_scale(c["src"], c["state"], c["dst"]); },
                  [](Values& v, DType) {
                    v["dst"] = v["src"];
                    scale_all(v["dst"], v["state"][ops::kScale]);
                  },
                  kTolF32, kTolBf16, kTolF16});
  rows.push_back({Op::amp_unscale_check_,
                  {inout("g0", {8}, uniform(-100, 100)), inout("g1", {8}, uniform(-100, 100)),
                   inout("state", {4}, values({256, 3, 0, 2}))},
                  [](Values& v) { v["g1"][3] = INFINITY; },
                  [](const Call& c) { ops::amp_unscale_check_({c["g0"], c["g1"]}, c["state"]); },
                  [](Values& v, DType) {  // an inf in g1: found_inf = 1; every grad / scale
                    scale_all(v["g0"], 1.0 / 256), scale_all(v["g1"], 1.0 / 256);
                    v["state"][ops::kFoundInf] = 1;
                  },
                  kStepF32, kStepF32, kStepF32});
  rows.push_back({Op::amp_update_scale_,
                  {inout("state", {4}, values({256, 1999, 0, 2}))},
                  nullptr,
                  [](const Call& c) { ops::amp_update_scale_(c["state"], ops::AmpScaleParams{}); },
                  [](Values& v, DType) {  // the 2000th good step: the scale doubles, the tracker restarts
                    v["state"][ops::kScale] = 512, v["state"][ops::kGrowthTracker] = 0;
                  },
                  kStepF32, kStepF32, kStepF32});
  rows.push_back({Op::clip_grad_norm_,
                  {inout("g0", {8}, uniform(-1, 1)), inout("g1", {8}, uniform(-1, 1)), out("total_norm", {1})},
                  nullptr,
                  [](const Call& c) { ops::clip_grad_norm_({c["g0"], c["g1"]}, 0.5, c["total_norm"]); },
                  [](Values& v, DType) {  // torch.nn.utils.clip_grad_norm_
                    double s = 0;
                    for (const char* g : {"g0", "g1"})
                      for (double x : v[g]) s += x * x;
                    const double norm = std::sqrt(s), coef = std::min(1.0, 0.5 / (norm + 1e-6));
                    scale_all(v["g0"], coef), scale_all(v["g1"], coef);
                    v["total_norm"] = {norm};
                  },
                  kStepF32, kStepF32, kStepF32});
  rows.push_back({Op::run_if_finite,
                  {in("state", {4}, values({256, 0, 0, 0})), inout("t", {8}, uniform(-1, 1))},
                  nullptr,
                  [](const Call& c) {  // fn doubles t: through its memory where the host can address it
                    const Tensor t = c["t"];
                    std::function<void()> fn = [t] { ops::scale_(t, 2.0f); };
                    if (c.device.kind != DeviceKind::cuda)
                      fn = [t] {
                        for (int64_t i = 0; i < t.numel(); ++i) static_cast<float*>(t.raw_data())[i] *= 2;
                      };
                    ops::run_if_finite(c["state"], {t}, std::move(fn));
                  },
                  [](Values& v, DType) { scale_all(v["t"], 2); },
                  kStepF32, kStepF32, kStepF32});
  return rows;
}

}  // namespace tandem::testing::op_table
