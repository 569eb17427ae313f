// Greedy generation against Hugging Face transformers: tests/golden/gpt2_hf_init.safetensors
// (transformers' save_pretrained of a random GPT-2: vocabulary 64, 32 positions, 2 layers, 2
// heads; it records no GPT2Config, so n_head comes from the caller) continued greedily for 20
// tokens after the prompt of tests/golden/gpt2_hf_generate.safetensors, which
// scripts/golden_gpt2_generate.py made with GPT2LMHeadModel (a full forward per token, checked
// against transformers' own cached generate()). The tokens must be transformers' and the
// last-position logits of each step within 1e-4 of the largest (the smallest gap between the
// two largest logits of a step, stored beside them, is about 30 times that).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tandem/error.h"
#include "tandem/nn/generate/generate.h"
#include "tandem/nn/generate/gpt_weights.h"
#include "tandem/safetensors.h"

namespace tandem::nn {
namespace {

const std::string kWeights = TANDEM_SOURCE_DIR "/tests/golden/gpt2_hf_init.safetensors";
const std::string kGolden = TANDEM_SOURCE_DIR "/tests/golden/gpt2_hf_generate.safetensors";

std::vector<int64_t> ids_of(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

TEST(GenerateGolden, GreedyTokensAndLogitsAreTransformers) {
  const NamedTensors golden = load_safetensors(kGolden);
  const std::vector<int64_t> prompt = ids_of(find_tensor(golden, "prompt", kGolden));
  const std::vector<int64_t> want = ids_of(find_tensor(golden, "tokens", kGolden));
  const std::vector<float> want_logits = find_tensor(golden, "logits", kGolden).to_vector();
  ASSERT_EQ(want.size(), 20u);
  const std::unique_ptr<Gpt> model = load_gpt(kWeights, 2);
  EXPECT_EQ(model->config().vocab_size, 64);
  EXPECT_EQ(model->config().block_size, 32);
  EXPECT_EQ(model->config().n_layer, 2);
  GptDecoder decoder(*model);
  GenerateOptions o;
  o.max_new_tokens = 20;
  o.sampling.temperature = 0;
  const GenerateResult r = generate(decoder, prompt, o);
  EXPECT_EQ(r.tokens, want);
  EXPECT_EQ(r.finish_reason, "length");
  // The logits step by step: the prompt, then each of transformers' tokens.
  decoder.reset();
  float largest = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const std::vector<float> got =
        decoder.append(i == 0 ? prompt : std::vector<int64_t>{want[i - 1]}).to_vector();
    ASSERT_EQ(got.size(), 64u);
    for (size_t v = 0; v < 64; ++v) {
      largest = std::max(largest, std::abs(want_logits[i * 64 + v]));
      worst = std::max(worst, std::abs(got[v] - want_logits[i * 64 + v]));
    }
  }
  EXPECT_GT(largest, 1.0f);
  EXPECT_LE(worst, 1e-4f * largest) << "largest " << largest;
}

TEST(GenerateGolden, SizesComeFromTheFileOrAreAskedFor) {
  try {
    load_gpt(kWeights);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "[generate] " + kWeights +
                                         " records no n_head (GPT2Config): give --n-head H, or put transformers' config.json beside the file");
  }
  try {
    load_gpt(kWeights, 3);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "[generate] " + kWeights + ": n_head 3 does not divide n_embd 32");
  }
  // Recorded sizes must agree with the tensors.
  NamedTensors t = load_safetensors(kWeights);
  EXPECT_EQ(gpt_config_of(t, {{"n_head", "4"}}, 0, "w").n_head, 4);
  try {
    gpt_config_of(t, {{"n_head", "2"}, {"n_layer", "3"}}, 0, "w");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[generate] w: metadata n_layer is 3, but the tensors say 2 (the "
                 "transformer.h.<i> blocks)");
  }
  try {
    gpt_config_of(t, {{"model", "resnet18"}}, 2, "w");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(
                  "[generate] w holds weights of model 'resnet18', which is not a GPT", 0),
              0u)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem::nn
