// Internal: the cpu classifier + cross-entropy as a function with the knobs its tests turn
// (the returned mean loss, a cap on the rows per block); CpuBackend::classifier_cross_entropy
// calls it. The other transformer ops are CpuBackend's methods (cpu_embedding.cpp,
// cpu_layer_norm.cpp, cpu_gelu.cpp, cpu_attention.cpp) and run their kernels directly.
// Arguments are checked by the caller (shapes, dtypes, contiguity, one host device), except
// the targets, which only the kernel reads. Data tensors (marked D) are f32 or bf16 and share
// one dtype; computed in f32, rounded once on store; weight gradients and the metrics are f32.
// Thread-safety: calls on distinct outputs may run concurrently; each uses the OpenMP team.
#pragma once

#include <cstdint>

#include "tandem/tensor.h"

namespace tandem::ops::cpu {

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
