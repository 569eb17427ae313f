// Internal: the cpu kernels of the transformer ops (GPT-2 style decoder blocks): token and
// position embedding, layer norm, GELU, the residual add, fused causal self-attention and the
// fused classifier + cross-entropy. Arguments are checked by the caller (shapes, dtypes,
// contiguity, one host device), except the token ids and targets, which only a kernel reads.
// Data tensors (marked D) are f32 or bf16 and share one dtype; computed in f32, rounded once
// on store. Parameters of layer norm, statistics, weight gradients and the metrics are f32.
// Thread-safety: calls on distinct outputs may run concurrently; each uses the OpenMP team.
#pragma once

#include <cstdint>

#include "tandem/tensor.h"

namespace tandem::ops::cpu {

/// y [B, T, C] D = wte[tokens[b, t]] + wpe[t]: tokens [B, T] i32 or i64, wte [V, C] D,
/// wpe [P, C] D with P >= T (undefined: no position term). Throws Error(invalid_argument,
/// "[embedding_forward] token 9 at [0, 3] is outside [0, 8)") for an id outside [0, V).
void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& y);
/// dwte [V, C] f32 (+)= the sum of dy [B, T, C] D over the positions holding each token id;
/// dwpe [P, C] f32 (+)= the sum over b of dy[b, t] for t < T (rows t >= T are zeroed, or left
/// when `accumulate`); either may be undefined. A deterministic scatter-add: positions are
/// grouped by id (a stable counting sort) and each id's rows are added in position order by
/// one thread, so the result is the same bits for any thread count. Throws as the forward.
void embedding_backward(const Tensor& dy, const Tensor& tokens, const Tensor& dwte, const Tensor& dwpe,
                        bool accumulate);

/// Layer norm over the last dimension (torch.nn.LayerNorm): x, y [N, C] D (any leading shape
/// flattened to N rows), gamma, beta [C] f32 (beta undefined: no shift), mean, rstd [N] f32
/// (saved for the backward: rstd = 1 / sqrt(biased var + eps)).
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd);
/// dx [N, C] D (overwritten; undefined: not computed), dgamma, dbeta [C] f32 ((+)=, each
/// optional) from dy, x [N, C] D and the forward's mean and rstd. dgamma and dbeta are the
/// same bits for any thread count.
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                         bool accumulate);

/// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GPT-2's GELU; torch.nn.GELU('tanh')),
/// element-wise, x and y D of one numel (y may be x).
void gelu_forward(const Tensor& x, const Tensor& y);
/// dx = dy * gelu'(x) (dx may be dy).
void gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& dx);
/// y = a + b, element-wise (the residual add; y may be a or b). The backward passes dy to both.
void add_forward(const Tensor& a, const Tensor& b, const Tensor& y);

/// Causal self-attention: qkv [B, T, 3C] D (q, k, v side by side, as GPT-2's c_attn output),
/// n_head H dividing C; y [B, T, C] D = softmax(q k^T / sqrt(C/H) + causal mask) v per head,
/// heads side by side; lse [B, H, T] f32 = the log-sum-exp of each row's scaled scores, all
/// the backward needs beside qkv and y (no [B, H, T, T] tensor is kept).
void attention_forward(const Tensor& qkv, int64_t n_head, const Tensor& y, const Tensor& lse);
/// dqkv [B, T, 3C] D (overwritten) from dy [B, T, C] D and the forward's qkv, y and lse.
/// The same bits for any thread count.
void attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& y, const Tensor& lse,
                        int64_t n_head, const Tensor& dqkv);

/// The fused classifier + cross-entropy (llm.c): logits = h w^T for h [N, C] D and w [V, C] D
/// (the tied token embedding), per row loss = logsumexp(logits) - logits[target], targets [N]
/// i32 or i64. Rows whose target is `ignore_index` count nowhere; rows with any other target
/// outside [0, V) are counted in metrics[3] and otherwise ignored (no throw). With n rows
/// counted, the mean loss is the sum of their losses / n, and its gradient times grad_loss is
/// folded straight into dh [N, C] D (overwritten) and dw [V, C] f32 ((+)= when `accumulate`),
/// each optional (both undefined: loss only). Logits are computed in blocks of rows
/// (at most classifier_block_rows(V) of them; f32 scratch), the softmax and its gradient in
/// place, so no [N, V] tensor exists. metrics [4] f32 (optional) gets
///   [0] += sum of the counted rows' losses, [1] += counted rows whose first maximum is the
///   target, [2] += counted rows, [3] += rows with a target outside [0, V) (not ignore_index).
/// Returns the mean loss (NaN when no row is counted, as torch.nn.CrossEntropyLoss).
/// `max_block_rows` > 0 caps the rows per block (tests use it to cross block boundaries).
float classifier_cross_entropy(const Tensor& h, const Tensor& w, const Tensor& targets, int64_t ignore_index,
                               float grad_loss, const Tensor& dh, const Tensor& dw, bool accumulate,
                               const Tensor& metrics, int64_t max_block_rows = 0);
/// Rows per block of the classifier's logits: 32 MiB of f32 logits, at least 1 row.
int64_t classifier_block_rows(int64_t vocab);

}  // namespace tandem::ops::cpu
