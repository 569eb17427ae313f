// Internal: launchers of the transformer kernels (cuda_layer_norm.cu, cuda_gelu.cu,
// cuda_embedding.cu, cuda_attention.cu, cuda_classifier_loss.cu), in the conventions of
// cuda_kernels.h: each enqueues on `s` and returns the launch status; tensors are contiguous;
// `void` pointers hold the data dtype `e` (f32, bf16 or f16: loaded as f32, computed in f32,
// rounded once on store); `float` pointers are f32 for every dtype. Every reduction has a
// fixed order (no floating-point atomics), so results do not depend on scheduling.
// The cpu kernels they mirror, and the formulas, are in src/backend/cpu/cpu_*_impl.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"

namespace tandem::cuda_kernels {

// ---- layer norm over rows of x [rows, cols] (cuda_layer_norm.cu) ----
/// y = (x - mean) rstd gamma + beta (beta null: no shift); mean, rstd [rows] f32. One warp per row.
cudaError_t layer_norm_forward(Elem e, const void* x, const float* gamma, const float* beta, void* y, float* mean,
                               float* rstd, int64_t rows, int64_t cols, float eps, cudaStream_t s);
/// Column partial sums per fixed chunk of rows for dgamma and dbeta.
constexpr int64_t kLayerNormChunkRows = 32;
/// Bytes of scratch layer_norm_backward needs for `rows` x `cols`.
size_t layer_norm_backward_scratch(int64_t rows, int64_t cols);
/// dx (null: not computed), dgamma and dbeta [cols] ((+)=, each may be null) from dy, x, gamma,
/// mean and rstd; `scratch` holds layer_norm_backward_scratch bytes.
cudaError_t layer_norm_backward(Elem e, const void* dy, const void* x, const float* gamma, const float* mean,
                                const float* rstd, void* dx, float* dgamma, float* dbeta, bool accumulate,
                                int64_t rows, int64_t cols, void* scratch, cudaStream_t s);

// ---- GELU (tanh form) and the residual add (cuda_gelu.cu) ----
cudaError_t gelu_forward(Elem e, const void* x, void* y, int64_t n, cudaStream_t s);
cudaError_t gelu_backward(Elem e, const void* dy, const void* x, void* dx, int64_t n, cudaStream_t s);
/// y = a + b (y may alias a or b).
cudaError_t add_forward(Elem e, const void* a, const void* b, void* y, int64_t n, cudaStream_t s);

// ---- token + position embedding (cuda_embedding.cu); ids i32 (`ids_i64` false) or i64 ----
/// y [B*T, C] = wte[id] + wpe[t] (wpe null: no position term). An id outside [0, V) gives a
/// zero row (the device does not stop for it; the loader checks token data against V).
cudaError_t embedding_forward(Elem e, const void* ids, bool ids_i64, const void* wte, const void* wpe, void* y,
                              int64_t batch, int64_t seq, int64_t vocab, int64_t c, cudaStream_t s);
/// Bytes of scratch embedding_backward needs for n = B*T positions.
size_t embedding_backward_scratch(int64_t n, int64_t vocab);
/// dwte [V, C] (+)= dy rows grouped by id, dwpe [T rows used of P, C] (+)= dy summed over the
/// batch (either may be null; without `accumulate` both are zeroed first, dwpe's P rows). Ids
/// are sorted stably with their positions (CUB radix sort) and each id's rows are summed in
/// position order by one block: deterministic. Ids outside [0, V) are skipped.
cudaError_t embedding_backward(Elem e, const void* dy, const void* ids, bool ids_i64, float* dwte, float* dwpe,
                               int64_t batch, int64_t seq, int64_t vocab, int64_t pos_rows, int64_t c,
                               bool accumulate, void* scratch, size_t scratch_bytes, cudaStream_t s);

// ---- causal self-attention (cuda_attention.cu); qkv [B, T, 3C], y [B, T, C], lse [B, H, T] ----
/// Head dimensions D = C / H up to kMaxHeadDim.
constexpr int64_t kMaxHeadDim = 128;
/// Online softmax per query (one warp each) over key tiles in shared memory.
cudaError_t attention_forward(Elem e, const void* qkv, void* y, float* lse, int64_t batch, int64_t seq,
                              int64_t c, int64_t heads, cudaStream_t s);
/// Bytes of scratch attention_backward needs (Di [B, H, T]).
size_t attention_backward_scratch(int64_t batch, int64_t seq, int64_t heads);
/// dqkv from dy, qkv, y and lse: Di = sum dO * O, then dQ with one warp per query and dK, dV
/// with one warp per key, each summing over its pairs in order (no atomics).
cudaError_t attention_backward(Elem e, const void* dy, const void* qkv, const void* y, const float* lse, void* dqkv,
                               int64_t batch, int64_t seq, int64_t c, int64_t heads, void* scratch, cudaStream_t s);

// ---- the fused classifier's rows (cuda_classifier_loss.cu); targets i32 or i64 ----
/// counted[0] = targets in [0, V), counted[1] = targets outside it other than ignore_index.
cudaError_t classifier_count(const void* targets, bool targets_i64, int64_t n, int64_t vocab, int64_t ignore_index,
                             int64_t* counted, cudaStream_t s);
/// Over logits [rows, V] f32 in place (the block's rows; targets, row_loss and row_correct
/// start at its first row): row_loss[r] (double), row_correct[r], and when `grad` the gradient
/// g = (softmax - onehot) * grad_loss / counted[0] over the logits, and g * e_scale in the data
/// dtype into grad_e when it is not null (the caller's products multiply by 1 / e_scale: f16's
/// range would make small gradients subnormal). grad_scale (device, optional: a loss
/// scaler's state) multiplies grad_loss by grad_scale[0]. One block per row.
cudaError_t classifier_rows(float* logits, const void* targets, bool targets_i64, int64_t rows, int64_t vocab,
                            const int64_t* counted, float grad_loss, const float* grad_scale, bool grad, Elem e, void* grad_e, float e_scale,
                            double* row_loss, uint8_t* row_correct, cudaStream_t s);
/// metrics[0] += sum of row_loss, [1] += sum of row_correct, [2] += counted[0], [3] += counted[1]
/// (one block, fixed order).
cudaError_t classifier_metrics(const double* row_loss, const uint8_t* row_correct, int64_t n, const int64_t* counted,
                               float* metrics, cudaStream_t s);

}  // namespace tandem::cuda_kernels
