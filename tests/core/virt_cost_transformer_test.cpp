// The planning model's FLOP counts of the transformer ops against counts made by hand from the
// formulas in src/backend/virt/virt_cost_transformer.h.
#include <gtest/gtest.h>

#include "backend/virt/virt_cost_transformer.h"

namespace tandem::virt {
namespace {

TEST(VirtCostTransformer, CountsByHand) {
  // B 1, T 2, C 4, H 2: 1 * 2 * 3 / 2 * 2 heads = 6 causal pairs of D = 2.
  EXPECT_EQ(attention_flops(1, 2, 4, 2, false), 6 * (2 * 2 * 2 + 5));
  EXPECT_EQ(attention_flops(1, 2, 4, 2, true), 6 * (5 * 2 * 2 + 4) + 2 * 4 * 2);
  // N 3, C 4, V 5: 15 logits.
  EXPECT_EQ(classifier_flops(3, 4, 5, false), 15 * (2 * 4 + 5));
  EXPECT_EQ(classifier_flops(3, 4, 5, true), 15 * (2 * 4 + 5) + 15 * (4 * 4 + 2));
  EXPECT_EQ(embedding_flops(6, 8, false), 48);
  EXPECT_EQ(embedding_flops(6, 8, true), 96);
  EXPECT_EQ(layer_norm_flops(10, false), 80);
  EXPECT_EQ(layer_norm_flops(10, true), 110);
  EXPECT_EQ(gelu_flops(10, false), 90);
  EXPECT_EQ(gelu_flops(10, true), 160);
  EXPECT_EQ(add_flops(10), 10);
}

// Attention grows with T^2 (causal: about half of T^2 pairs) and the classifier with N V C.
TEST(VirtCostTransformer, Scaling) {
  EXPECT_NEAR(attention_flops(1, 2048, 768, 12, false) / attention_flops(1, 1024, 768, 12, false), 4.0, 0.01);
  EXPECT_DOUBLE_EQ(classifier_flops(20, 8, 50, true), 2 * classifier_flops(10, 8, 50, true));
}

}  // namespace
}  // namespace tandem::virt
