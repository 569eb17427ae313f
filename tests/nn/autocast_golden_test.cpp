// bf16 mixed precision against PyTorch 2.15's CPU autocast (scripts/golden_autocast.py): three
// SGD steps of the reference CNN (1x16x16 inputs) from formula-made weights on one batch, the
// loss of each step compared with torch's. fp32 first, to show both sides build the same
// model and data: |tandem - torch| <= 1e-4 per loss. bf16: autocast rounds the conv/linear
// biases and the weight gradients to bf16 where tandem keeps them f32 (ops.h), so the runs
// part by a few bf16 roundings per step: |tandem - torch| <= 0.5% of the loss (torch's own
// bf16 and fp32 losses differ by 1.6% at step 3), and at the last step the bf16 run must be
// closer to torch's autocast loss than to its fp32 one. (Later steps of this tiny batch part
// chaotically in torch too, so three steps are compared.)
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/models.h"
#include "tandem/ops.h"
#include "tandem/optim/optimizer.h"

namespace tandem::nn {
namespace {

constexpr int64_t kN = 16, kS = 16;

std::vector<double> golden(const std::string& key) {
  std::ifstream in(TANDEM_SOURCE_DIR "/tests/golden/autocast_fmnist_cnn.txt");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string k;
    ss >> k;
    if (k != key) continue;
    std::vector<double> v;
    for (double x; ss >> x;) v.push_back(x);
    return v;
  }
  ADD_FAILURE() << "no '" << key << "' line in tests/golden/autocast_fmnist_cnn.txt";
  return {};
}

// The script's weights: b * sin(1.7 i + 0.3 j) for conv/linear weights and biases.
void formula_init(Module& m) {
  double bound = 0;
  const std::vector<Parameter*> ps = m.parameters();
  for (size_t j = 0; j < ps.size(); ++j) {
    Parameter& p = *ps[j];
    const bool weight = p.name.size() >= 6 && p.name.compare(p.name.size() - 6, 6, "weight") == 0;
    if (weight && p.value.dim() > 1) {
      bound = 1.0 / std::sqrt(static_cast<double>(p.value.numel() / p.value.shape()[0]));
    } else if (weight || bound == 0) {
      bound = 0;
      continue;
    }
    float* v = p.value.data<float>();
    for (int64_t i = 0; i < p.value.numel(); ++i)
      v[i] = static_cast<float>(bound * std::sin(1.7 * static_cast<double>(i) + 0.3 * static_cast<double>(j)));
    if (!weight) bound = 0;
  }
}

std::vector<double> run(DType dt) {
  ModulePtr m = make_model("fmnist-cnn", ModelSpec{1, kS, kS, 10}, 0);
  formula_init(*m);
  if (dt != DType::f32) m->set_compute_dtype(dt);
  Tensor x = Tensor::empty({kN, 1, kS, kS});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(1.5 * std::sin(0.05 * i));
  if (dt != DType::f32) x = x.to(dt);
  Tensor y = Tensor::empty({kN}, DType::i64);
  for (int64_t n = 0; n < kN; ++n) y.data<int64_t>()[n] = (3 * n) % 10;
  optim::OptimizerOptions o;
  o.lr = 0.005;
  auto opt = optim::make_optimizer("sgd", m->parameters(), o);
  CrossEntropyLoss loss_fn;
  std::vector<double> losses;
  for (int s = 0; s < 3; ++s) {
    opt->zero_grad();
    losses.push_back(loss_fn.forward(m->forward(x), y).item(0));
    m->backward(loss_fn.backward());
    opt->step();
  }
  return losses;
}

TEST(AutocastGolden, Fp32MatchesTorch) {
  const std::vector<double> want = golden("fp32"), got = run(DType::f32);
  ASSERT_EQ(want.size(), 3u);
  for (size_t s = 0; s < want.size(); ++s) EXPECT_NEAR(got[s], want[s], 1e-4) << "step " << s + 1;
}

TEST(AutocastGolden, Bf16MatchesTorchAutocast) {
  if (!ops::supports(ops::Op::conv2d_forward, DType::bf16, Device{}))
    GTEST_SKIP() << "bf16 is not supported on this CPU (oneDNN needs avx512_core)";
  const std::vector<double> want = golden("bf16"), fp32 = golden("fp32"), got = run(DType::bf16);
  ASSERT_EQ(want.size(), 3u);
  for (size_t s = 0; s < want.size(); ++s) EXPECT_NEAR(got[s], want[s], 0.005 * want[s]) << "step " << s + 1;
  EXPECT_LT(std::fabs(got[2] - want[2]), std::fabs(got[2] - fp32[2])) << "closer to torch fp32 than to autocast";
}

}  // namespace
}  // namespace tandem::nn
