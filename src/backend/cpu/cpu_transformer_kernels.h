// Internal: the loop kernels of the transformer ops (layer norm, GELU, the residual add,
// attention, the fused classifier's softmax rows), built twice from the *_impl.h headers:
// for the AVX2 floor (cpu_transformer_avx2.cpp) and for AVX-512 (cpu_transformer_avx512.cpp),
// chosen once by cpu::has_avx512() (cpu_isa.h). CpuBackend's methods (cpu_<op>.cpp) unpack
// tensors into these argument blocks. Both builds compute the same formulas; sums may differ
// in the last bits between them (vector width changes the order of partial sums), never
// between thread counts.
// Pointers typed `void` hold the op's data dtype `dt` (f32 or bf16, loaded as f32, rounded
// once on store); `float` pointers are f32 for every dtype.
#pragma once

#include <cstdint>

#include "tandem/dtype.h"

namespace tandem::ops::cpu {

/// Layer norm over the last dimension of x [rows, cols] (forward: x, gamma, beta -> y, mean,
/// rstd; backward: dy, x, gamma, mean, rstd -> dx, dgamma, dbeta).
struct LayerNormArgs {
  DType dt = DType::f32;
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
  const void* x = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;  // forward; null: no shift
  void* y = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  float* dgamma = nullptr;  // backward; null: not computed
  float* dbeta = nullptr;
  bool accumulate = false;
};

/// Causal self-attention of qkv [B, T, 3C] with H heads of D = C / H (forward: qkv -> y
/// [B, T, C], lse [B, H, T]; backward: dy, qkv, y, lse -> dqkv [B, T, 3C]).
struct AttentionArgs {
  DType dt = DType::f32;
  int64_t batch = 0, seq = 0, channels = 0, heads = 0;
  const void* qkv = nullptr;
  void* y = nullptr;       // forward output; backward input (the forward's y)
  float* lse = nullptr;    // forward output; backward input
  const void* dy = nullptr;
  void* dqkv = nullptr;
};

/// The fused classifier's softmax over one block of rows of logits [rows, vocab] (f32, in
/// place): per row, the loss lse - z[target], whether argmax == target, and, when `grad`,
/// the gradient (softmax - onehot(target)) * scale written back over the logits (and, when
/// `grad_bf16` is set, rounded to bf16 there). Rows whose target is not in [0, vocab) get no
/// loss (row_loss 0) and a zero gradient.
struct XentRowsArgs {
  int64_t rows = 0, vocab = 0;
  float* logits = nullptr;
  const int64_t* targets = nullptr;
  double* row_loss = nullptr;    // [rows]
  uint8_t* row_correct = nullptr;  // [rows]: 1 when the first maximum is the target
  bool grad = false;
  float scale = 0.0f;
  uint16_t* grad_bf16 = nullptr;  // [rows, vocab] or null
};

struct TransformerKernels {
  void (*layer_norm_forward)(const LayerNormArgs&);
  void (*layer_norm_backward)(const LayerNormArgs&);
  /// y = gelu(x) (tanh form), dx = dy * gelu'(x), over n elements.
  void (*gelu_forward)(DType dt, const void* x, void* y, int64_t n);
  void (*gelu_backward)(DType dt, const void* dy, const void* x, void* dx, int64_t n);
  /// y = a + b over n elements (y may alias a or b).
  void (*add)(DType dt, const void* a, const void* b, void* y, int64_t n);
  void (*attention_forward)(const AttentionArgs&);
  void (*attention_backward)(const AttentionArgs&);
  void (*xent_rows)(const XentRowsArgs&);
};

const TransformerKernels& transformer_kernels_avx2();
const TransformerKernels& transformer_kernels_avx512();
/// The build for this CPU (AVX-512 where cpu::has_avx512(), else AVX2).
const TransformerKernels& transformer_kernels();

}  // namespace tandem::ops::cpu
