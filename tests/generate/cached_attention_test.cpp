// cached_attention against a float64 reference of causal attention: random q, k, v of 3
// heads, the new positions appended to a cache in chunks (1 token, then 4, then 1s), each
// chunk's output equal to softmax(q k^T / sqrt(D)) v over every position up to the query's,
// computed in double from the same inputs (1e-5 of the largest output).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tandem/error.h"
#include "tandem/nn/generate/cached_attention.h"
#include "tandem/rng.h"

namespace tandem::nn {
namespace {

constexpr int64_t kHeads = 3, kD = 8, kC = kHeads * kD, kP = 12;

// qkv rows of positions [0, kP): uniform in [-2, 2).
std::vector<float> random_qkv() {
  Philox rng(7, 1);
  std::vector<float> v(static_cast<size_t>(kP * 3 * kC));
  for (float& x : v) x = 4.0f * rng.uniform() - 2.0f;
  return v;
}

// The output row of position p, head by head, in double.
std::vector<double> reference(const std::vector<float>& qkv, int64_t p) {
  std::vector<double> y(kC, 0.0);
  for (int64_t h = 0; h < kHeads; ++h) {
    std::vector<double> s(static_cast<size_t>(p + 1));
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j <= p; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < kD; ++e)
        dot +=
            static_cast<double>(qkv[p * 3 * kC + h * kD + e]) * qkv[j * 3 * kC + kC + h * kD + e];
      s[j] = dot / std::sqrt(static_cast<double>(kD));
      mx = std::max(mx, s[j]);
    }
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int64_t j = 0; j <= p; ++j)
      for (int64_t e = 0; e < kD; ++e)
        y[h * kD + e] += s[j] / sum * qkv[j * 3 * kC + 2 * kC + h * kD + e];
  }
  return y;
}

TEST(CachedAttention, ChunksMatchFloat64CausalAttention) {
  const std::vector<float> all = random_qkv();
  Tensor k = Tensor::zeros({kP, kC}), v = Tensor::zeros({kP, kC});
  const std::vector<int64_t> chunks = {1, 4, 1, 1, 3, 2};  // 12 positions
  int64_t p0 = 0;
  double worst = 0, largest = 0;
  for (int64_t n : chunks) {
    Tensor qkv = Tensor::empty({n, 3 * kC});
    std::copy(all.begin() + p0 * 3 * kC, all.begin() + (p0 + n) * 3 * kC, qkv.data<float>());
    Tensor y = Tensor::empty({n, kC});
    cached_attention(qkv, p0, kHeads, k, v, y);
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<double> want = reference(all, p0 + i);
      for (int64_t e = 0; e < kC; ++e) {
        worst = std::max(worst, std::abs(want[e] - y.data<float>()[i * kC + e]));
        largest = std::max(largest, std::abs(want[e]));
      }
    }
    p0 += n;
  }
  EXPECT_EQ(p0, kP);
  EXPECT_GT(largest, 0.1);
  EXPECT_LE(worst, 1e-5 * largest) << "largest " << largest;
  // The cache holds every position's key and value.
  EXPECT_EQ(k.data<float>()[(kP - 1) * kC + 5], all[(kP - 1) * 3 * kC + kC + 5]);
  EXPECT_EQ(v.data<float>()[3 * kC + 2], all[3 * 3 * kC + 2 * kC + 2]);
}

TEST(CachedAttention, RefusesBadShapesAndPositions) {
  Tensor k = Tensor::zeros({4, kC}), v = Tensor::zeros({4, kC});
  Tensor qkv = Tensor::zeros({2, 3 * kC}), y = Tensor::zeros({2, kC});
  try {
    cached_attention(qkv, 3, kHeads, k, v, y);  // positions 3, 4 in a cache of 4
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[cached_attention] positions 3 .. 4 do not fit a cache of 4 positions");
  }
  EXPECT_THROW(cached_attention(qkv, 0, 5, k, v, y), Error);  // 5 does not divide 24
  EXPECT_THROW(cached_attention(qkv, 0, kHeads, k, Tensor::zeros({4, kC + 1}), y),
               Error);                                                                  // v's width
  EXPECT_THROW(cached_attention(qkv, 0, kHeads, k, v, Tensor::zeros({3, kC})), Error);  // y's rows
  EXPECT_THROW(cached_attention(qkv, -1, kHeads, k, v, y), Error);
}

}  // namespace
}  // namespace tandem::nn
