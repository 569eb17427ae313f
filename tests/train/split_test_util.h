// Shared by the split tests: their synthetic data sets and the weight comparisons.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "tandem/data/synthetic_dataset.h"

namespace tandem::testing {

inline std::shared_ptr<const data::Dataset> split_train_set(int64_t n) {
  return std::make_shared<data::SyntheticDataset>(n, 11);
}
inline std::shared_ptr<const data::Dataset> split_test_set() { return std::make_shared<data::SyntheticDataset>(100, 12); }

/// The largest difference between a and b relative to the largest |weight| of a (the absolute
/// difference when every weight is 0). a and b: per-tensor weights in the same order.
inline double relative_difference(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double largest = 0, worst = 0;
  EXPECT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size() && k < b.size(); ++k)
    for (size_t i = 0; i < a[k].size(); ++i) {
      largest = std::max(largest, std::fabs(static_cast<double>(a[k][i])));
      worst = std::max(worst, std::fabs(static_cast<double>(a[k][i]) - b[k][i]));
    }
  return largest > 0 ? worst / largest : worst;
}

/// ||a - b|| / ||a|| over all weights (||a - b|| when a is all 0).
inline double relative_l2(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double num = 0, den = 0;
  for (size_t k = 0; k < a.size() && k < b.size(); ++k)
    for (size_t i = 0; i < a[k].size() && i < b[k].size(); ++i) {
      const double d = static_cast<double>(a[k][i]) - b[k][i];
      num += d * d;
      den += static_cast<double>(a[k][i]) * a[k][i];
    }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace tandem::testing
