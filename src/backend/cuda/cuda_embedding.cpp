// cuda backend: token + position embedding (own kernels and CUB's radix sort, cuda_embedding.cu).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_transformer_kernels.h"

// The cuda backend's ops (tandem/transformer_ops.h; arguments checked by the front end).
namespace tandem::ops {

void CudaBackend::embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& y) {
  CudaOpScope s("embedding_forward", {&tokens, &wte, &wpe}, {&y});
  TD_CUDA(cuda_kernels::embedding_forward(elem(wte), tokens.raw_data(), tokens.dtype() == DType::i64, wte.raw_data(),
                                          wpe.defined() ? wpe.raw_data() : nullptr, y.raw_data(), tokens.size(0),
                                          tokens.size(1), wte.size(0), wte.size(1), s.stream));
}

void CudaBackend::embedding_backward(const Tensor& dy, const Tensor& tokens, const Tensor& dwte, const Tensor& dwpe,
                                     bool accumulate) {
  CudaOpScope s("embedding_backward", {&dy, &tokens}, {&dwte, &dwpe});
  const int64_t batch = tokens.size(0), seq = tokens.size(1), c = dy.size(-1);
  const int64_t vocab = dwte.defined() ? dwte.size(0) : 0;
  const size_t bytes = dwte.defined() ? cuda_kernels::embedding_backward_scratch(batch * seq, vocab) : 1;
  CudaScratch scratch(s.device, bytes);
  TD_CUDA(cuda_kernels::embedding_backward(
      elem(dy), dy.raw_data(), tokens.raw_data(), tokens.dtype() == DType::i64, opt_f32(dwte), opt_f32(dwpe), batch,
      seq, vocab, dwpe.defined() ? dwpe.size(0) : 0, c, accumulate, scratch.get(), bytes, s.stream));
}

}  // namespace tandem::ops
