// Choosing tokens: greedy is the first largest logit; top_k 1 is greedy at any temperature;
// the same seed and position give the same token and other seeds other tokens; top_k keeps
// the draws among the k largest logits; and the draws follow softmax(logits / temperature):
// over 40,000 seeds each token's share is within 0.01 of its probability computed in double;
// top_p keeps the draws in the nucleus of a hand-computed distribution, in its proportions,
// and top_p 1 is no nucleus bit for bit.
// Then generate(): the same seed gives the same tokens, other seeds others, top_k 1 the greedy
// sequence, eos stops it, and its refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "tandem/error.h"
#include "tandem/nn/generate/generate.h"
#include "tandem/nn/generate/sampling.h"
#include "tandem/rng.h"

namespace tandem::nn {
namespace {

const std::vector<float> kLogits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f, 1.5f, -3.0f};

TEST(Sampling, GreedyIsTheFirstLargest) {
  EXPECT_EQ(argmax(kLogits.data(), 8), 1);
  EXPECT_EQ(sample_token(kLogits.data(), 8, {0.0, 0, 5}, 3), 1);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    EXPECT_EQ(sample_token(kLogits.data(), 8, {1.0, 1, seed}, 3), 1);
    EXPECT_EQ(sample_token(kLogits.data(), 8, {100.0, 1, seed}, 9), 1);
  }
  const float nan_first[] = {NAN, 1.0f, 3.0f};
  EXPECT_EQ(argmax(nan_first, 3), 2);
}

TEST(Sampling, SeedAndPositionDecideTheDraw) {
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    const int64_t a = sample_token(kLogits.data(), 8, {1.0, 0, seed}, 4);
    EXPECT_EQ(a, sample_token(kLogits.data(), 8, {1.0, 0, seed}, 4));
    seen.insert(a);
  }
  EXPECT_GE(seen.size(), 5u);  // other seeds, other tokens
}

TEST(Sampling, TopKKeepsTheLargest) {
  // The 3 largest: ids 1 and 3 (2.0, the lower id first) and 6 (1.5).
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 500; ++seed)
    seen.insert(sample_token(kLogits.data(), 8, {2.0, 3, seed}, 0));
  EXPECT_EQ(seen, (std::set<int64_t>{1, 3, 6}));
  seen.clear();
  for (uint64_t seed = 0; seed < 500; ++seed)
    seen.insert(sample_token(kLogits.data(), 8, {2.0, 2, seed}, 0));
  EXPECT_EQ(seen, (std::set<int64_t>{1, 3}));
}

TEST(Sampling, DrawsFollowTheTemperedSoftmax) {
  for (const double temperature : {0.7, 1.0, 2.5}) {
    std::vector<double> p(8);
    double sum = 0;
    for (size_t i = 0; i < 8; ++i) sum += (p[i] = std::exp((kLogits[i] - 2.0) / temperature));
    std::vector<int> count(8, 0);
    const int n = 40000;
    for (int s = 0; s < n; ++s)
      ++count[static_cast<size_t>(
          sample_token(kLogits.data(), 8, {temperature, 0, static_cast<uint64_t>(s)}, 1))];
    for (size_t i = 0; i < 8; ++i)
      EXPECT_NEAR(static_cast<double>(count[i]) / n, p[i] / sum, 0.01)
          << "token " << i << " at T " << temperature;
  }
}

// Probabilities 0.5, 0.25, 0.15, 0.1 at temperature 1 (logits: their logs, in a shuffled
// order). Nuclei by hand: top_p 0.4 keeps {0.5}; 0.7 keeps {0.5, 0.25} (0.5 < 0.7 <= 0.75);
// 0.8 keeps {0.5, 0.25, 0.15} (0.75 < 0.8 <= 0.9); 0.95 keeps all four.
TEST(Sampling, TopPKeepsTheNucleus) {
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.1f),
                                     std::log(0.25f)};  // ids 1, 3, 0, 2 by probability
  const int n = 20000;
  const auto shares = [&](double top_p, int64_t top_k) {
    std::vector<int> count(4, 0);
    for (int s = 0; s < n; ++s) {
      const SamplingOptions o{1.0, top_k, static_cast<uint64_t>(s), top_p};
      ++count[static_cast<size_t>(sample_token(logits.data(), 4, o, 2))];
    }
    std::vector<double> share(4);
    for (size_t i = 0; i < 4; ++i) share[i] = static_cast<double>(count[i]) / n;
    return share;
  };
  std::vector<double> p = shares(0.4, 0);
  EXPECT_EQ(p, (std::vector<double>{0, 1, 0, 0}));  // the argmax only
  p = shares(0.7, 0);
  EXPECT_EQ(p[0], 0);  // outside the nucleus: never drawn
  EXPECT_EQ(p[2], 0);
  EXPECT_NEAR(p[1], 2.0 / 3, 0.01);  // 0.5 / 0.75
  EXPECT_NEAR(p[3], 1.0 / 3, 0.01);
  p = shares(0.8, 0);
  EXPECT_EQ(p[2], 0);
  EXPECT_NEAR(p[1], 0.5 / 0.9, 0.01);
  EXPECT_NEAR(p[3], 0.25 / 0.9, 0.01);
  EXPECT_NEAR(p[0], 0.15 / 0.9, 0.01);
  p = shares(0.95, 0);
  const std::vector<double> all = {0.15, 0.5, 0.1, 0.25};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(p[i], all[i], 0.01);
  // After top_k 2 the nucleus is of {0.5, 0.25} renormalized (2/3, 1/3): top_p 0.6 keeps one.
  EXPECT_EQ(shares(0.6, 2), (std::vector<double>{0, 1, 0, 0}));
  // top_p 1 is no nucleus, bit for bit, with and without top_k, at other temperatures.
  for (uint64_t seed = 0; seed < 2000; ++seed)
    for (const int64_t k : {0, 3})
      for (const double t : {0.7, 1.0, 2.5}) {
        SamplingOptions o{t, k, seed};
        const int64_t plain = sample_token(kLogits.data(), 8, o, 5);
        o.top_p = 1.0;
        ASSERT_EQ(sample_token(kLogits.data(), 8, o, 5), plain) << seed;
      }
}

TEST(Sampling, RefusesBadOptions) {
  try {
    sample_token(kLogits.data(), 8, {-0.5, 0, 0}, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[generate] temperature -0.5: expected a finite number >= 0 (0 = greedy)");
  }
  EXPECT_THROW(sample_token(kLogits.data(), 8, {INFINITY, 0, 0}, 0), Error);
  EXPECT_THROW(sample_token(kLogits.data(), 8, {1.0, -1, 0}, 0), Error);
  for (const double top_p : {0.0, -0.1, 1.5, double(NAN)}) {
    try {
      sample_token(kLogits.data(), 8, {1.0, 0, 0, top_p}, 0);
      FAIL() << "expected an error for top_p " << top_p;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected a number in (0, 1] (1 = every token)"),
                std::string::npos)
          << e.what();
    }
  }
}

// A small random GPT for generate().
class Generate : public ::testing::Test {
 protected:
  void SetUp() override {
    uint64_t index = 0;
    for (const NamedTensor& t : model_.state_dict()) {
      Philox rng(5, index++);
      float* p = t.tensor.data<float>();
      for (int64_t i = 0; i < t.tensor.numel(); ++i) p[i] += 0.5f * (2 * rng.uniform() - 1);
    }
    model_.eval();
  }
  std::vector<int64_t> run(double temperature, int64_t top_k, uint64_t seed, int64_t n = 12,
                           int64_t eos = -1) {
    GenerateOptions o;
    o.max_new_tokens = n;
    o.sampling = {temperature, top_k, seed};
    o.eos_id = eos;
    return generate(decoder_, {3, 1, 4}, o).tokens;
  }
  Gpt model_{GptConfig{40, 16, 2, 2, 16, 1e-5f}};
  GptDecoder decoder_{model_};
};

TEST_F(Generate, SameSeedSameTokensOtherSeedsOthers) {
  const std::vector<int64_t> a = run(1.0, 0, 7);
  ASSERT_EQ(a.size(), 12u);
  EXPECT_EQ(run(1.0, 0, 7), a);
  int differ = 0;
  for (uint64_t seed = 8; seed < 13; ++seed) differ += run(1.0, 0, seed) != a;
  EXPECT_EQ(differ, 5);
}

TEST_F(Generate, TopKOneIsGreedyAndGreedyIsArgmaxOfTheForward) {
  const std::vector<int64_t> greedy = run(0.0, 0, 0);
  EXPECT_EQ(run(0.9, 1, 123), greedy);
  // The greedy tokens, one by one from Gpt::forward on the whole sequence.
  std::vector<int64_t> seq = {3, 1, 4};
  for (int i = 0; i < 12; ++i) {
    Tensor t = Tensor::empty({1, static_cast<int64_t>(seq.size())}, DType::i64);
    std::copy(seq.begin(), seq.end(), t.data<int64_t>());
    const std::vector<float> l = model_.forward(t).to_vector();
    seq.push_back(argmax(l.data() + (seq.size() - 1) * 40, 40));
  }
  EXPECT_EQ(std::vector<int64_t>(seq.begin() + 3, seq.end()), greedy);
}

TEST_F(Generate, StopsAtEosAndRefusesBadInput) {
  const std::vector<int64_t> all = run(1.0, 0, 3);
  const int64_t eos = all[4];
  const size_t first = static_cast<size_t>(std::find(all.begin(), all.end(), eos) - all.begin());
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.sampling = {1.0, 0, 3};
  o.eos_id = eos;
  const GenerateResult r = generate(decoder_, {3, 1, 4}, o);
  EXPECT_EQ(r.tokens,
            std::vector<int64_t>(all.begin(), all.begin() + static_cast<ptrdiff_t>(first) + 1));
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(generate(decoder_, {3, 1, 4}, {12, {1.0, 0, 3}, -1}).finish_reason, "length");
  EXPECT_TRUE(generate(decoder_, {3}, {0, {}, -1}).tokens.empty());
  const auto message = [&](const std::vector<int64_t>& prompt, GenerateOptions g) {
    try {
      generate(decoder_, prompt, g);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({}, {}), "[generate] the prompt is empty: expected at least 1 token");
  EXPECT_EQ(message({1, 40}, {}),
            "[generate] prompt token 40 at position 1 is outside the model's vocabulary [0, 40)");
  EXPECT_EQ(message({1}, {-1, {}, -1}), "[generate] max_new_tokens -1: expected an integer >= 0");
  EXPECT_EQ(message({1, 2}, {15, {}, -1}),
            "[generate] a prompt of 2 tokens and max_new_tokens 15 pass the model's 16 positions "
            "(n_positions): "
            "expected at most 14 new tokens");
  EXPECT_EQ(message({1}, {1, {1.0, -2, 0}, -1}),
            "[generate] top_k -2: expected an integer >= 0 (0 = every token)");
}

}  // namespace
}  // namespace tandem::nn
