// The ops of GPT-2 style decoder-only transformers (Radford et al. 2019, "Language Models are
// Unsupervised Multitask Learners"; the layouts of Hugging Face transformers' GPT2Model):
// token and position embedding, layer norm, GELU (tanh form), the residual add, fused causal
// self-attention, the fused classifier + cross-entropy over the vocabulary and the linear layer
// with [in, out] weights. Each checks its
// arguments here and runs on the backend of its tensors' device (tandem/backend.h).
//
// Conventions (as tandem/ops.h): tensors contiguous, row-major, all on one device; the data
// tensors, marked D, share one dtype D: f32, bf16 or f16 where the backend supports it
// (tandem/op_support.h: cpu and virt f32 and bf16 natively on AVX-512 CPUs, 16-bit stored and
// computed in f32 through the storage wrapper otherwise, f16 always so; cuda f32, bf16, f16).
// Kernels compute in f32 and round each output once. Tensors not marked D are f32 unless
// stated (layer-norm parameters and statistics, weight gradients, lse, metrics); token ids and
// targets are i32 or i64. Outputs are allocated by the caller with the documented shape and
// overwritten, or added to where `accumulate` is true. Argument errors throw
// Error(invalid_argument, "[<op>] ...") naming the argument, the expected and the found shape
// or dtype; an unsupported data dtype throws Error(not_available, "[<op>] f16 is not supported
// on <device>"). On virt and cuda every op is enqueued on the device's current stream and none
// blocks the host; an error found by a kernel there (a token id out of range on virt) is
// raised by the next synchronisation.
// Thread-safety: as tandem/ops.h (distinct outputs from several threads at once).
#pragma once

#include <cstdint>

#include "tandem/op_support.h"
#include "tandem/tensor.h"

namespace tandem::ops {

/// y [B, T, C] D = wte[tokens[b, t]] + wpe[t] (GPT-2's input: transformer.wte and .wpe).
/// tokens [B, T] i32 or i64, wte [V, C] D, wpe [P, C] D with P >= T, or undefined (no position
/// term). Throws for bad shapes or dtypes; on cpu Error(invalid_argument, "[embedding_forward]
/// token 9 at [0, 3] is outside [0, 8)") for an id outside [0, V) (virt: raised at the next
/// synchronisation; cuda: the row is zero and gets no gradient).
void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& y);
/// dwte [V, C] f32 (+)= the sum of dy [B, T, C] D over the positions holding each id, dwpe
/// [P, C] f32 (+)= sum over b of dy[b, t] (rows t >= T zeroed, or left when `accumulate`);
/// either may be undefined. Deterministic: the same bits for any thread count on cpu.
void embedding_backward(const Tensor& dy, const Tensor& tokens, const Tensor& dwte, const Tensor& dwpe,
                        bool accumulate);

/// Layer norm over the last dimension (torch.nn.LayerNorm(C, eps)): x, y [..., C] D (any
/// leading shape, N rows), gamma [C] f32, beta [C] f32 or undefined (no shift); writes
/// mean [N] f32 and rstd [N] f32 = 1 / sqrt(biased variance + eps) for the backward.
/// y = (x - mean) * rstd * gamma + beta. eps > 0.
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd);
/// dx [..., C] D (overwritten; undefined: not computed), dgamma [C] f32 and dbeta [C] f32
/// ((+)= when `accumulate`; each optional) from dy and x [..., C] D and the forward's mean
/// and rstd. dgamma and dbeta are the same bits for any thread count on cpu.
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, bool accumulate);

/// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) element-wise (GPT-2's GELU,
/// torch.nn.GELU(approximate='tanh')); x, y D of one shape; y may be x.
void gelu_forward(const Tensor& x, const Tensor& y);
/// dx = dy * gelu'(x), dy, x, dx D of one shape; dx may be dy.
void gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& dx);
/// y = a + b element-wise, no activation (a transformer block's residual add), a, b, y D of
/// one shape; y may be a or b. Its backward passes dy to both inputs (no op).
void add_forward(const Tensor& a, const Tensor& b, const Tensor& y);

/// Fused causal self-attention (GPT-2's attention after c_attn): qkv [B, T, 3C] D holds q, k
/// and v side by side per position (c_attn's output), n_head H >= 1 divides C; y [B, T, C] D
/// = softmax(q k^T / sqrt(C / H) + causal mask) v per head, heads side by side (the input of
/// c_proj); lse [B, H, T] f32 receives each row's log-sum-exp of the scaled scores. No
/// [B, H, T, T] tensor is kept (flash attention: Dao et al. 2022); qkv, y and lse are all the
/// backward needs. cuda needs C / H <= 128 (Error(not_available) otherwise).
void attention_forward(const Tensor& qkv, int64_t n_head, const Tensor& y, const Tensor& lse);
/// dqkv [B, T, 3C] D (overwritten) from dy [B, T, C] D and the forward's qkv, y and lse.
/// The same bits for any thread count on cpu.
void attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& y, const Tensor& lse, int64_t n_head,
                        const Tensor& dqkv);

/// The fused classifier + cross-entropy (the tied lm_head and the loss of GPT2LMHeadModel;
/// llm.c's fused classifier): logits = h w^T for h [N, C] D and w [V, C] D, row loss =
/// logsumexp(logits) - logits[target], targets [N] i32 or i64. Rows whose target equals
/// `ignore_index` count nowhere; a target outside [0, V) otherwise is counted in metrics[3]
/// and ignored (no throw). With n counted rows the mean loss is their sum / n; its gradient
/// times `grad_loss` goes to dh [N, C] D (overwritten) and dw [V, C] f32 ((+)= when
/// `accumulate`), each optional (both undefined: the loss only). No [N, V] tensor exists:
/// logits are made in blocks of rows in f32 scratch. metrics [4] f32 (optional) gets
///   [0] += sum of the counted rows' losses, [1] += counted rows whose first maximum is the
///   target, [2] += counted rows, [3] += rows with a target outside [0, V), not ignore_index;
/// the mean loss is metrics[0] / metrics[2] (read it with Tensor::to on the host).
/// grad_scale (optional, f32 with >= 1 element on h's device: a loss scaler's state, whose
/// element 0 is the scale) multiplies grad_loss when the op runs, in stream order, so a
/// dynamic loss scale that lives on the device reaches the gradients before they are rounded
/// to D (fp16 training).
void classifier_cross_entropy(const Tensor& h, const Tensor& w, const Tensor& targets, int64_t ignore_index,
                              float grad_loss, const Tensor& dh, const Tensor& dw, bool accumulate,
                              const Tensor& metrics, const Tensor& grad_scale = Tensor());

/// The fully connected layer with its weight stored [in, out] (Hugging Face transformers'
/// Conv1D, GPT-2's c_attn, c_proj and c_fc; torch.addmm(b, x, w)):
///   x [N, in] D, w [in, out] D, b [out] f32 (optional) -> y [N, out] D = x w + b.
void linear_in_out_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y);
/// dx [N, in] D = dy [N, out] D w^T (overwritten).
void linear_in_out_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx);
/// dw [in, out] f32 = x^T dy and db [out] f32 = the sum over N of dy (optional), from x and dy
/// (D, accumulated in f32); added when `accumulate`.
void linear_in_out_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                                    bool accumulate);

}  // namespace tandem::ops
