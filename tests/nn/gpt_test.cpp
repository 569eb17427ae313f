// The GPT-2 model (tandem/nn/gpt.h): state-dict names, order and shapes as transformers'
// GPT2LMHeadModel, GPT-2's initialisation, and a finite-difference gradient check of a
// 2-layer model through the fused classifier loss, with the logits path agreeing with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "forwarding_backend.h"
#include "nn_test_util.h"
#include "tandem/nn/gpt.h"
#include "tandem/ops.h"
#include "tandem/virt.h"

namespace tandem::nn {
namespace {

GptConfig tiny() { return GptConfig{11, 8, 2, 2, 8, 1e-5f}; }

Tensor tokens_of(const Shape& s, int64_t vocab, uint64_t seed) {
  Tensor t = Tensor::empty(s, DType::i64);
  Philox rng(seed, 9);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = rng.randint(static_cast<uint32_t>(vocab));
  return t;
}

TEST(Gpt, StateDictIsGpt2LmHeadModels) {
  Gpt m(tiny());
  std::vector<std::string> want{"transformer.wte.weight", "transformer.wpe.weight"};
  for (const char* b : {"transformer.h.0.", "transformer.h.1."})
    for (const char* n : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                          "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                          "mlp.c_proj.weight", "mlp.c_proj.bias"})
      want.push_back(std::string(b) + n);
  want.push_back("transformer.ln_f.weight");
  want.push_back("transformer.ln_f.bias");
  const std::vector<NamedTensor> sd = m.state_dict();
  ASSERT_EQ(sd.size(), want.size());
  for (size_t i = 0; i < sd.size(); ++i) EXPECT_EQ(sd[i].name, want[i]);
  const std::vector<Parameter*> ps = m.parameters();
  ASSERT_EQ(ps.size(), want.size());
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(ps[i]->name, want[i]);
  // Conv1D keeps transformers' [in, out] layout.
  EXPECT_EQ(shape_str(sd[0].tensor.shape()), "[11, 8]");
  EXPECT_EQ(shape_str(sd[1].tensor.shape()), "[8, 8]");
  EXPECT_EQ(shape_str(sd[4].tensor.shape()), "[8, 24]");
  EXPECT_EQ(shape_str(sd[10].tensor.shape()), "[8, 32]");
  EXPECT_EQ(shape_str(sd[12].tensor.shape()), "[32, 8]");
  // The tied lm_head is counted once: 88 + 64 + 2 * (32 + 216 + 72 + 288 + 264) + 16.
  EXPECT_EQ(m.num_parameters(), 1912);
  const GptConfig g = gpt_config("gpt2", 50257), mini = gpt_config("gpt-mini", 4096);
  EXPECT_EQ(g.n_layer * 1000000 + g.n_head * 10000 + g.n_embd, 12120768);
  EXPECT_EQ(g.block_size, 1024);
  EXPECT_EQ(mini.n_layer * 1000000 + mini.n_head * 10000 + mini.n_embd, 6060384);
  EXPECT_EQ(mini.block_size, 256);
  EXPECT_THROW(gpt_config("gpt3", 10), Error);
  EXPECT_THROW(Gpt(GptConfig{11, 8, 2, 3, 8, 1e-5f}), Error);  // 3 heads do not divide 8
}

// Sample standard deviations of GPT-2's N(0, 0.02^2) and N(0, (0.02 / sqrt(2 L))^2) draws:
// with n >= 12288 samples the sample std is within 3% of sigma (its relative standard error
// is 1 / sqrt(2 n) < 0.7%).
TEST(Gpt, Gpt2Initialisation) {
  Gpt m(GptConfig{64, 32, 4, 4, 64, 1e-5f});
  m.init_parameters(5);
  const auto stddev = [](const Tensor& t) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < t.numel(); ++i) s += t.item(i), s2 += t.item(i) * t.item(i);
    const double mean = s / static_cast<double>(t.numel());
    return std::sqrt(s2 / static_cast<double>(t.numel()) - mean * mean);
  };
  const double proj = 0.02 / std::sqrt(8.0);
  for (const NamedTensor& t : m.state_dict()) {
    const std::string& n = t.name;
    if (n.find("ln_") != std::string::npos) {
      const double want = n.ends_with("weight") ? 1.0 : 0.0;
      for (int64_t i = 0; i < t.tensor.numel(); ++i) ASSERT_EQ(t.tensor.item(i), want) << n;
    } else if (n.ends_with("bias")) {
      for (int64_t i = 0; i < t.tensor.numel(); ++i) ASSERT_EQ(t.tensor.item(i), 0.0) << n;
    } else if (t.tensor.numel() >= 12288) {
      const double want = n.ends_with("c_proj.weight") ? proj : 0.02;
      EXPECT_NEAR(stddev(t.tensor), want, 0.03 * want) << n;
    }
  }
}

// Every parameter set to values of order one (GPT-2's init makes the gradients tiny and the
// attention nearly uniform), so that the check sees the model's curvature.
void randomise(Gpt& m, uint64_t seed) {
  uint64_t k = 0;
  for (Parameter* p : m.parameters()) {
    const bool ln_weight = p->name.find("ln_") != std::string::npos && p->name.ends_with("weight");
    const Tensor r = nn_test::random_tensor(p->value.shape(), seed + k++, -0.5f, 0.5f);
    for (int64_t i = 0; i < r.numel(); ++i) p->value.data<float>()[i] = (ln_weight ? 1.0f : 0.0f) + r.data<float>()[i];
  }
}

double mean_loss(Gpt& m, const Tensor& tokens, const Tensor& targets) {
  Tensor metrics = Tensor::zeros({4});
  m.forward_loss(tokens, targets, metrics);
  return metrics.item(0) / metrics.item(2);
}

// Central differences (L(v + h) - L(v - h)) / 2h of the mean loss, h = 1e-2, against the
// fused gradient, for every element of every parameter. Error budget: the loss (about 2.4,
// sums of at most a few hundred f32 terms) is computed to about 1e-6, so rounding gives at
// most 1e-6 / h = 1e-4 per difference; the truncation term h^2 / 6 |L'''| is below 1e-4 for
// parameters of order one. Hence |numeric - analytic| <= 1e-2 max|analytic| + 2e-4 per tensor.
TEST(Gpt, GradientCheckTwoLayers) {
  Gpt m(tiny());
  randomise(m, 100);
  const Tensor tokens = tokens_of({2, 5}, 11, 1), targets = tokens_of({2, 5}, 11, 2);
  m.train();
  m.zero_grad();
  Tensor metrics = Tensor::zeros({4});
  m.forward_loss(tokens, targets, metrics);
  m.backward_loss();
  EXPECT_EQ(metrics.item(2), 10.0);
  std::vector<Tensor> grads;
  for (Parameter* p : m.parameters()) grads.push_back(p->grad.clone());
  m.eval();
  constexpr float kH = 1e-2f;
  const std::vector<Parameter*> ps = m.parameters();
  for (size_t k = 0; k < ps.size(); ++k) {
    float* v = ps[k]->value.data<float>();
    double max_err = 0, max_ana = 0;
    for (int64_t i = 0; i < ps[k]->value.numel(); ++i) {
      const float keep = v[i];
      v[i] = keep + kH;
      const double lp = mean_loss(m, tokens, targets);
      v[i] = keep - kH;
      const double lm = mean_loss(m, tokens, targets);
      v[i] = keep;
      max_err = std::max(max_err, std::fabs((lp - lm) / (2.0 * kH) - grads[k].item(i)));
      max_ana = std::max(max_ana, std::fabs(grads[k].item(i)));
    }
    EXPECT_GT(max_ana, 1e-3) << ps[k]->name;
    EXPECT_LE(max_err, 1e-2 * max_ana + 2e-4) << ps[k]->name << " (largest gradient " << max_ana << ")";
  }
}

// forward() + backward(dlogits) with the mean cross-entropy's dlogits, computed here in
// float64, gives the fused path's gradients and loss: the same f32 products in another order,
// within 1e-5 of each tensor's largest gradient.
TEST(Gpt, LogitsPathMatchesTheFusedLoss) {
  Gpt m(tiny());
  randomise(m, 200);
  const Tensor tokens = tokens_of({2, 5}, 11, 3), targets = tokens_of({2, 5}, 11, 4);
  m.train();
  m.zero_grad();
  Tensor metrics = Tensor::zeros({4});
  m.forward_loss(tokens, targets, metrics);
  m.backward_loss();
  std::vector<Tensor> fused;
  for (Parameter* p : m.parameters()) fused.push_back(p->grad.clone());
  m.zero_grad();
  const Tensor logits = m.forward(tokens);
  const int64_t n = 10, v = 11;
  Tensor dlogits = Tensor::empty({2, 5, v});
  double loss = 0;
  for (int64_t r = 0; r < n; ++r) {
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < v; ++j) mx = std::max(mx, logits.item(r * v + j));
    for (int64_t j = 0; j < v; ++j) sum += std::exp(logits.item(r * v + j) - mx);
    const int64_t t = targets.data<int64_t>()[r];
    loss += std::log(sum) + mx - logits.item(r * v + t);
    for (int64_t j = 0; j < v; ++j)
      dlogits.data<float>()[r * v + j] =
          static_cast<float>((std::exp(logits.item(r * v + j) - mx) / sum - (j == t ? 1.0 : 0.0)) / n);
  }
  EXPECT_NEAR(metrics.item(0) / metrics.item(2), loss / n, 1e-5 * loss / n);
  EXPECT_FALSE(m.backward(dlogits).defined());
  // The trainer's loss_forward: the same figures, counting the 10 token positions.
  m.eval();
  Tensor again = Tensor::zeros({4});
  m.loss_forward(tokens, targets, again);
  EXPECT_EQ(again.item(2), 10.0);
  EXPECT_NEAR(again.item(0) / again.item(2), loss / n, 1e-5 * loss / n);
  m.train();
  const std::vector<Parameter*> ps = m.parameters();
  for (size_t k = 0; k < ps.size(); ++k) EXPECT_LE(nn_test::rel_err(ps[k]->grad, fused[k]), 1e-5) << ps[k]->name;
}

// ops_used() is what the model calls (the precision check asks about those only): a training
// step through the fused loss, one through the logits and the trainer's evaluation, on virt behind a
// recording backend, in f32 and with bf16 compute copies, call exactly the reported ops.
TEST(Gpt, CallsTheOpsItReports) {
  constexpr Device kVirt{DeviceKind::virt, 0};
  for (DType dtype : {DType::f32, DType::bf16}) {
    Gpt m(tiny());
    if (dtype != DType::f32) m.set_compute_dtype(dtype);
    m.to(kVirt);
    std::vector<ops::Op> called;
    {
      testing::BackendSwap swap(kVirt);
      const Stream s = virt_current_stream(0);
      const Tensor tokens = tokens_of({2, 5}, 11, 5).to(kVirt, s), targets = tokens_of({2, 5}, 11, 6).to(kVirt, s);
      const Tensor metrics = Tensor::empty({4}, DType::f32, kVirt);
      ops::zero_(metrics);
      m.train();
      m.zero_grad();
      m.forward_loss(tokens, targets, metrics);
      m.backward_loss();
      const Tensor logits = m.forward(tokens);
      EXPECT_EQ(logits.dtype(), dtype);
      const Tensor dlogits = Tensor::empty(logits.shape(), dtype, kVirt);
      ops::zero_(dlogits);
      m.backward(dlogits);
      m.eval();
      m.loss_forward(tokens, targets, metrics);  // the trainer's
      s.synchronize();
      called = swap->calls();
    }
    const std::vector<ops::Op> reported = m.ops_used();
    const auto has = [](const std::vector<ops::Op>& v, ops::Op op) {
      return std::find(v.begin(), v.end(), op) != v.end();
    };
    for (ops::Op op : called) EXPECT_TRUE(has(reported, op)) << dtype_name(dtype) << " calls " << ops::op_name(op);
    for (ops::Op op : reported) EXPECT_TRUE(has(called, op)) << dtype_name(dtype) << " reports " << ops::op_name(op);
  }
}

}  // namespace
}  // namespace tandem::nn
