// Helpers for the nn tests: golden-file access, comparisons, random tensors.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tandem/rng.h"
#include "tandem/safetensors.h"
#include "tandem/tensor.h"

namespace tandem::nn_test {

inline const NamedTensors& golden() {
  static const NamedTensors g = load_safetensors(TANDEM_SOURCE_DIR "/tests/golden/layers.safetensors");
  return g;
}

inline Tensor gold(const std::string& name) { return find_tensor(golden(), name, "layers golden").clone(); }

/// max|a - b| / max|b| (b the reference); shapes must match.
inline double rel_err(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(shape_str(a.shape()), shape_str(b.shape()));
  if (a.numel() != b.numel()) return 1e9;
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    num = std::max(num, std::fabs(a.item(i) - b.item(i)));
    den = std::max(den, std::fabs(b.item(i)));
  }
  return den > 0 ? num / den : num;
}

/// Uniform values in [lo, hi) from Philox(seed).
inline Tensor random_tensor(const Shape& s, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t = Tensor::empty(s);
  Philox rng(seed, 77);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = lo + (hi - lo) * rng.uniform();
  return t;
}

/// An i64 label tensor [n].
inline Tensor labels_tensor(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i64);
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

/// sum_i a[i] * b[i] in double.
inline double dot(const Tensor& a, const Tensor& b) {
  double s = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.item(i) * b.item(i);
  return s;
}

}  // namespace tandem::nn_test
