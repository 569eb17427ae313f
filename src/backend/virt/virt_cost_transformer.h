// Internal: FLOP counts of the transformer ops for the virt device's planning mode (the roofline
// model of virt_cost.h; bytes are those of the tensors each op touches, counted by the launch).
// A multiply-add counts 2; add, multiply, compare, exp, tanh, sqrt and divide count 1.
// Shapes as in include/tandem/transformer_ops.h:
//   embedding forward: 1 per output element (wte row + wpe row); backward: 2 per dy element
//     (one add into dwte, one into dwpe).
//   layer norm forward: 8 per element (sum; subtract, square, sum; subtract, two multiplies,
//     add); backward: 11 per element (g = dy gamma, two row sums with xhat, dx, dgamma, dbeta).
//   GELU forward: 9 per element (cube 2, fused polynomial 2, tanh, add, two multiplies, the
//     constant); backward: 16; the residual add: 1.
//   causal attention, per (batch, head) with T keys and queries and D = C / H: the causal
//     products count T (T + 1) / 2 pairs; forward 2 products (q k^T, p v) of 2 D each, plus 5
//     per pair for the softmax (max, subtract, exp, sum, scale); backward 5 products (q k^T
//     again, dO v^T, dQ, dK, dV) plus 4 per pair (exp, subtract, multiply, mask), plus 2 D per
//     query for Di.
//   fused classifier over N rows, V classes, C features: logits 2 N V C, softmax and loss 5 N V;
//     with gradients dh 2 N V C and dw 2 N V C more, plus 2 N V for (p - onehot) * scale.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace tandem::virt {

double embedding_flops(int64_t positions, int64_t channels, bool backward);
double layer_norm_flops(int64_t elements, bool backward);
double gelu_flops(int64_t elements, bool backward);
double add_flops(int64_t elements);
double attention_flops(int64_t batch, int64_t seq, int64_t channels, int64_t heads, bool backward);
double classifier_flops(int64_t rows, int64_t channels, int64_t vocab, bool grad);

}  // namespace tandem::virt
