// The key/value-cache decoder against the whole-sequence forward of nn::Gpt: a small GPT (3
// layers, 4 heads, 32 wide, 24 positions, 50 tokens) with every parameter random (biases and
// LayerNorm parameters too, so no term is zero or one), one sequence of 20 tokens. The logits
// of every position, whether the tokens come as one prefill, a prefill of 7 then one at a time,
// or chunks of 3, equal Gpt::forward's [1, T, V] logits within 1e-4 of the largest. Then the
// decoder's refusals: an id outside the vocabulary, more tokens than positions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tandem/error.h"
#include "tandem/nn/generate/gpt_decoder.h"
#include "tandem/rng.h"

namespace tandem::nn {
namespace {

GptConfig small() {
  return GptConfig{50, 24, 3, 4, 32, 1e-5f};
}

// Every parameter uniform in [-scale, scale) around its usual value (LayerNorm weights around 1).
void randomize(Gpt& m) {
  uint64_t index = 0;
  for (const NamedTensor& t : m.state_dict()) {
    Philox rng(11, index++);
    const bool ln_weight =
        t.name.find("ln_") != std::string::npos && t.name.find(".weight") != std::string::npos;
    float* p = t.tensor.data<float>();
    for (int64_t i = 0; i < t.tensor.numel(); ++i)
      p[i] = (ln_weight ? 1.0f : 0.0f) + 0.3f * (2 * rng.uniform() - 1);
  }
}

std::vector<int64_t> sequence(int64_t n) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((i * 17 + 3) % 50);
  return ids;
}

// Gpt::forward's logits [T, V] of `ids`.
std::vector<float> full_logits(Gpt& m, const std::vector<int64_t>& ids) {
  Tensor tokens = Tensor::empty({1, static_cast<int64_t>(ids.size())}, DType::i64);
  std::copy(ids.begin(), ids.end(), tokens.data<int64_t>());
  return m.forward(tokens).to_vector();
}

// Feeds `ids` to a fresh decoder in chunks of the given sizes; the logits of every position.
std::vector<float> cached_logits(const Gpt& m, const std::vector<int64_t>& ids,
                                 const std::vector<int64_t>& chunks) {
  GptDecoder d(m);
  std::vector<float> out;
  size_t at = 0;
  for (int64_t n : chunks) {
    const std::vector<int64_t> part(ids.begin() + static_cast<ptrdiff_t>(at),
                                    ids.begin() + static_cast<ptrdiff_t>(at + n));
    const std::vector<float> l = d.append(part, true).to_vector();
    out.insert(out.end(), l.begin(), l.end());
    at += static_cast<size_t>(n);
  }
  EXPECT_EQ(d.position(), static_cast<int64_t>(ids.size()));
  return out;
}

TEST(GptDecoder, CachedLogitsEqualTheFullForward) {
  Gpt m(small());
  randomize(m);
  m.eval();
  const std::vector<int64_t> ids = sequence(20);
  const std::vector<float> want = full_logits(m, ids);
  ASSERT_EQ(want.size(), 20u * 50u);
  float largest = 0;
  for (float v : want) largest = std::max(largest, std::abs(v));
  ASSERT_GT(largest, 1.0f);
  std::vector<int64_t> one_by_one = {7};
  one_by_one.resize(14, 1);
  const std::vector<std::vector<int64_t>> ways = {{20}, one_by_one, {3, 3, 3, 3, 3, 3, 2}};
  for (const auto& chunks : ways) {
    const std::vector<float> got = cached_logits(m, ids, chunks);
    ASSERT_EQ(got.size(), want.size());
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    EXPECT_LE(worst, 1e-4f * largest) << chunks.size() << " chunks; largest logit " << largest;
  }
}

TEST(GptDecoder, LastLogitsAndReset) {
  Gpt m(small());
  randomize(m);
  m.eval();
  const std::vector<int64_t> ids = sequence(6);
  GptDecoder d(m);
  const std::vector<float> all = d.append(ids, true).to_vector();
  d.reset();
  EXPECT_EQ(d.position(), 0);
  const Tensor last = d.append(ids);
  ASSERT_EQ(last.shape(), Shape({1, 50}));
  const std::vector<float> l = last.to_vector();
  // The head's matrix product of 1 row and of 6 may sum in another order: f32 rounding apart.
  for (int64_t v = 0; v < 50; ++v)
    EXPECT_NEAR(l[v], all[5 * 50 + v], 1e-5f * (1 + std::abs(all[5 * 50 + v]))) << v;
}

TEST(GptDecoder, RefusesIdsOutsideTheVocabularyAndTooManyPositions) {
  Gpt m(small());
  GptDecoder d(m);
  try {
    d.append({1, 2, 50});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[GptDecoder] token 50 at position 2 is outside the vocabulary [0, 50)");
  }
  EXPECT_EQ(d.position(), 0);
  d.append(sequence(20));
  try {
    d.append(sequence(5));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "[GptDecoder] 20 cached and 5 new tokens pass the model's 24 positions (n_positions)");
  }
  EXPECT_EQ(d.position(), 20);
  EXPECT_THROW(d.append({}), Error);
}

}  // namespace
}  // namespace tandem::nn
