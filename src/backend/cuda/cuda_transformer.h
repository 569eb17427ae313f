// Internal: the cuda versions of the transformer ops, with the shapes, dtypes and semantics of
// the cpu kernels (src/backend/cpu/cpu_transformer.h), f32, bf16 and f16. Each runs on the
// calling thread's current stream of its tensors' device inside a CudaOpScope (cuda_backend.h)
// and never waits for the device. Differences from the cpu:
//  - ids and targets are not read on the host: an embedding id outside [0, V) gives a zero
//    row (and no gradient); the classifier counts bad targets in metrics[3] as the cpu does;
//  - classifier_cross_entropy returns nothing (the loss is in metrics, read back by the
//    caller when it wants it);
//  - attention needs a head dimension C / H <= 128 (Error(not_available) otherwise).
#pragma once

#include <cstdint>

#include "tandem/tensor.h"

namespace tandem::ops::cuda_ops {

void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& y);
void embedding_backward(const Tensor& dy, const Tensor& tokens, const Tensor& dwte, const Tensor& dwpe,
                        bool accumulate);
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd);
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                         bool accumulate);
void gelu_forward(const Tensor& x, const Tensor& y);
void gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& dx);
void add_forward(const Tensor& a, const Tensor& b, const Tensor& y);
void attention_forward(const Tensor& qkv, int64_t n_head, const Tensor& y, const Tensor& lse);
void attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& y, const Tensor& lse, int64_t n_head,
                        const Tensor& dqkv);
/// Logits in blocks of at most classifier_block_rows(V) rows (128 MiB of f32 scratch).
void classifier_cross_entropy(const Tensor& h, const Tensor& w, const Tensor& targets, int64_t ignore_index,
                              float grad_loss, const Tensor& dh, const Tensor& dw, bool accumulate,
                              const Tensor& metrics);
int64_t classifier_block_rows(int64_t vocab);

}  // namespace tandem::ops::cuda_ops
