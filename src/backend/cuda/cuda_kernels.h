// Internal: launchers of tandem's own CUDA kernels (defined in the .cu files beside this
// header). Each enqueues its kernel(s) on `s` and returns the launch status (cudaGetLastError),
// which the caller checks with TD_CUDA; sizes are 64-bit and
// the kernels use grid-stride loops. Tensors are contiguous f32 unless stated.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tandem/optim_constants.h"

namespace tandem::cuda_kernels {

// ---- element-wise and linear-layer helpers (cuda_elementwise.cu) ----
cudaError_t relu_forward(const float* x, float* y, int64_t n, cudaStream_t s);
cudaError_t relu_backward(const float* dy, const float* y, float* dx, int64_t n, cudaStream_t s);
/// y[i] = max(a[i] + b[i], 0) (y may alias a or b).
cudaError_t add_relu_forward(const float* a, const float* b, float* y, int64_t n, cudaStream_t s);
/// Philox4x32-10 key and counter words 1..3 as tandem::Philox(seed, counter) sets them; element
/// i takes word i % 4 of block i / 4 (the CPU backend's i-th draw).
struct PhiloxKey {
  uint32_t key[2];
  uint32_t ctr[3];
};
cudaError_t dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, float p, PhiloxKey k, cudaStream_t s);
cudaError_t dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t n, float scale, cudaStream_t s);
cudaError_t axpy(float* dst, const float* src, float alpha, int64_t n, cudaStream_t s);
cudaError_t scale(float* dst, float alpha, int64_t n, cudaStream_t s);
/// y[r, c] += b[c] for y [rows, cols].
cudaError_t add_row_bias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t s);
/// out[c] (+)= sum over r of a[r, c] for a [rows, cols].
cudaError_t sum_rows(const float* a, float* out, int64_t rows, int64_t cols, bool accumulate, cudaStream_t s);

// ---- max pooling (cuda_pool.cu); indices i32 flat h*W + w per plane ----
struct PoolShape {
  int64_t planes, H, W, P, Q, kh, kw, sh, sw, ph, pw;
};
cudaError_t max_pool_forward(const float* x, float* y, int32_t* indices, const PoolShape& p, cudaStream_t s);
cudaError_t max_pool_backward(const float* dy, const int32_t* indices, float* dx, const PoolShape& p, cudaStream_t s);
/// y[p] = mean of x[p * hw .. p * hw + hw) for p < planes (one warp per plane, summed in double).
cudaError_t global_avg_pool_forward(const float* x, float* y, int64_t planes, int64_t hw, cudaStream_t s);
/// dx[p * hw + i] = dy[p] / hw.
cudaError_t global_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t hw, cudaStream_t s);

// ---- loss (cuda_loss.cu); labels i64 [N], logits [N, C] ----
/// Sets *bad_row (initialised to UINT64_MAX by the launcher) to the first row whose label is
/// outside [0, C).
cudaError_t check_labels(const int64_t* labels, int64_t n, int64_t c, unsigned long long* bad_row, cudaStream_t s);
/// probs = softmax(logits); *loss = mean over rows of the smoothed cross-entropy (double).
cudaError_t softmax_xent_forward(const float* logits, const int64_t* labels, float* probs, double* row_loss,
                          double* loss, int64_t n, int64_t c, double smoothing, cudaStream_t s);
cudaError_t softmax_xent_backward(const float* probs, const int64_t* labels, float* dlogits, int64_t n, int64_t c,
                           float smoothing, float scale, cudaStream_t s);
cudaError_t count_correct(const float* logits, const int64_t* labels, unsigned long long* count, int64_t n, int64_t c,
                   cudaStream_t s);
/// softmax_xent_forward's probs and row_loss [N] (scratch), then one block adds to metrics [4]:
/// sum of row_loss, rows whose argmax equals the label, N, rows with a label outside [0, C).
cudaError_t softmax_xent_accumulate(const float* logits, const int64_t* labels, float* probs, double* row_loss,
                                    float* metrics, int64_t n, int64_t c, double smoothing, cudaStream_t s);

// ---- batch norm over (N, H, W) per channel (cuda_batch_norm.cu); x [N, C, HW] ----
struct BnShape {
  int64_t n, c, hw;
};
cudaError_t batch_norm_forward_training(const float* x, const float* gamma, const float* beta, float* y,
                                 float* save_mean, float* save_var, float* running_mean, float* running_var,
                                 const BnShape& sh, double eps, double momentum, bool fuse_relu, cudaStream_t s);
cudaError_t batch_norm_forward_inference(const float* x, const float* gamma, const float* beta, const float* mean,
                                  const float* var, float* y, const BnShape& sh, double eps, bool fuse_relu,
                                  cudaStream_t s);
cudaError_t batch_norm_backward(const float* dy, const float* x, const float* gamma, const float* save_mean,
                         const float* save_var, const float* y, float* dx, float* dgamma, float* dbeta,
                         const BnShape& sh, double eps, bool accumulate, bool fuse_relu, cudaStream_t s);

// ---- optimizers (cuda_optim.cu); constants from ops::adam_constants / sgd_constants ----
/// out_kind: 0 no copy, 1 f32, 2 bf16, 3 f16.
cudaError_t adam(float* param, const float* grad, float* m, float* v, void* out, int out_kind, int64_t n,
                 const ops::AdamConstants& c, cudaStream_t s);
cudaError_t sgd(float* param, const float* grad, float* buf, void* out, int out_kind, int64_t n,
                const ops::SgdConstants& c, cudaStream_t s);

}  // namespace tandem::cuda_kernels
