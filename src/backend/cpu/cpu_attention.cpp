// Fused causal self-attention on the cpu: one task per (batch, head), query blocks against
// their causal keys with oneDNN sgemm, softmax in place (cpu_attention_impl.h, built for AVX2
// and AVX-512; cpu_transformer_kernels.h).
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_transformer_kernels.h"

namespace tandem::ops::cpu {
namespace {

AttentionArgs args_of(const Tensor& qkv, int64_t n_head) {
  AttentionArgs a;
  a.dt = qkv.dtype();
  a.batch = qkv.size(0);
  a.seq = qkv.size(1);
  a.channels = qkv.size(2) / 3;
  a.heads = n_head;
  a.qkv = qkv.raw_data();
  return a;
}

}  // namespace

}  // namespace tandem::ops::cpu

// The cpu backend's ops (tandem/transformer_ops.h; arguments checked by the front end).
namespace tandem::ops {

void CpuBackend::attention_forward(const Tensor& qkv, int64_t n_head, const Tensor& y, const Tensor& lse) {
  cpu::AttentionArgs a = cpu::args_of(qkv, n_head);
  a.y = y.raw_data();
  a.lse = lse.data<float>();
  if (a.batch * a.seq * a.channels == 0) return;
  cpu::transformer_kernels().attention_forward(a);
}

void CpuBackend::attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& y, const Tensor& lse,
                                    int64_t n_head, const Tensor& dqkv) {
  cpu::AttentionArgs a = cpu::args_of(qkv, n_head);
  a.y = y.raw_data();
  a.lse = lse.data<float>();
  a.dy = dy.raw_data();
  a.dqkv = dqkv.raw_data();
  if (a.batch * a.seq * a.channels == 0) return;
  cpu::transformer_kernels().attention_backward(a);
}

}  // namespace tandem::ops
