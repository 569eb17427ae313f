// A 2-layer GPT-2 against Hugging Face transformers' GPT2LMHeadModel with the same weights
// (tests/golden/gpt2_tiny.safetensors, made by scripts/golden_gpt2.py): the weights load by
// their transformers names and shapes into Gpt's state dict, and the logits, the mean
// cross-entropy (ignore_index -100) and every parameter's gradient (the tied embedding's
// holding both uses) agree. Both sides compute in f32 and differ in the order of sums only:
// 1e-5 of the largest value of each tensor for the logits and the loss, 1e-4 for the
// gradients (the backward chains two more layers of f32 sums over up to 22 positions).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "nn_test_util.h"
#include "tandem/nn/gpt.h"

namespace tandem::nn {
namespace {

const NamedTensors& gold() {
  static const NamedTensors g = load_safetensors(TANDEM_SOURCE_DIR "/tests/golden/gpt2_tiny.safetensors");
  return g;
}

Tensor find(const std::string& name) { return find_tensor(gold(), name, "gpt2 golden").clone(); }

std::unique_ptr<Gpt> loaded() {
  auto m = std::make_unique<Gpt>(GptConfig{37, 16, 2, 2, 16, 1e-5f});
  for (const NamedTensor& t : m->state_dict()) {
    const Tensor w = find("model." + t.name);
    EXPECT_EQ(shape_str(w.shape()), shape_str(t.tensor.shape())) << t.name;
    std::memcpy(t.tensor.raw_data(), w.raw_data(), w.nbytes());
  }
  return m;
}

TEST(GptGolden, LogitsMatchTransformers) {
  auto m = loaded();
  m->eval();
  const Tensor logits = m->forward(find("tokens"));
  EXPECT_LE(nn_test::rel_err(logits, find("logits")), 1e-5);
}

TEST(GptGolden, FusedLossAndGradientsMatchTransformers) {
  auto m = loaded();
  m->train();
  m->zero_grad();
  Tensor metrics = Tensor::zeros({4});
  m->forward_loss(find("tokens"), find("targets"), metrics, 1.0f, -100);
  m->backward_loss();
  EXPECT_EQ(metrics.item(2), 20.0);  // 22 positions, 2 ignored
  EXPECT_NEAR(metrics.item(0) / metrics.item(2), find("loss").item(0), 1e-5 * find("loss").item(0));
  for (Parameter* p : m->parameters()) EXPECT_LE(nn_test::rel_err(p->grad, find("grad." + p->name)), 1e-4) << p->name;
}

// With bf16 compute copies (mixed precision: f32 masters, activations in bf16) each weight
// and each layer's output is rounded once to bf16 (2^-9 relative); about a dozen roundings
// lie between the tokens and a logit (embedding, two blocks of LayerNorm, attention, MLP and
// residual sums, ln_f, the weights they read), so the logits stay within 12 * 2^-9 < 2.5% of
// the largest one, and the mean cross-entropy, which moves by at most 2 max |dz|, within
// twice that of the largest logit.
TEST(GptGolden, Bf16ComputeStaysWithinItsRounding) {
  auto m = loaded();
  m->set_compute_dtype(DType::bf16);
  m->eval();
  const Tensor logits = m->forward(find("tokens"));
  ASSERT_EQ(logits.dtype(), DType::bf16);
  const Tensor want = find("logits");
  EXPECT_LE(nn_test::rel_err(logits.to(DType::f32), want), 0.025);
  double top = 0;
  for (int64_t i = 0; i < want.numel(); ++i) top = std::max(top, std::fabs(want.item(i)));
  Tensor metrics = Tensor::zeros({4});
  m->forward_loss(find("tokens"), find("targets"), metrics, 1.0f, -100);
  EXPECT_NEAR(metrics.item(0) / metrics.item(2), find("loss").item(0), 2 * 0.025 * top);
}

}  // namespace
}  // namespace tandem::nn
