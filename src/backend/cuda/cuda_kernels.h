// Internal: launchers of tandem's own CUDA kernels (defined in the .cu files beside this
// header). Each enqueues its kernel(s) on `s` and returns the launch status (cudaGetLastError),
// which the caller checks with TD_CUDA; sizes are 64-bit and
// the kernels use grid-stride loops. Tensors are contiguous. Pointers typed `void` hold the
// op's data dtype `e` (f32, bf16 or f16: loaded as f32, computed and accumulated in f32 or
// double, stored rounded to nearest even); pointers typed `float` are f32 for every dtype.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tandem/optim_constants.h"

namespace tandem::cuda_kernels {

/// The element type of a kernel's data tensors.
enum class Elem : uint8_t { f32 = 0, bf16 = 1, f16 = 2 };

// ---- element-wise and linear-layer helpers (cuda_elementwise.cu) ----
cudaError_t relu_forward(Elem e, const void* x, void* y, int64_t n, cudaStream_t s);
cudaError_t relu_backward(Elem e, const void* dy, const void* y, void* dx, int64_t n, cudaStream_t s);
/// y[i] = max(a[i] + b[i], 0) (y may alias a or b).
cudaError_t add_relu_forward(Elem e, const void* a, const void* b, void* y, int64_t n, cudaStream_t s);
/// Philox4x32-10 key and counter words 1..3 as tandem::Philox(seed, counter) sets them; element
/// i takes word i % 4 of block i / 4 (the CPU backend's i-th draw).
struct PhiloxKey {
  uint32_t key[2];
  uint32_t ctr[3];
};
cudaError_t dropout_forward(Elem e, const void* x, void* y, uint8_t* mask, int64_t n, float p, PhiloxKey k,
                            cudaStream_t s);
cudaError_t dropout_backward(Elem e, const void* dy, const uint8_t* mask, void* dx, int64_t n, float scale,
                             cudaStream_t s);
cudaError_t axpy(Elem e, void* dst, const void* src, float alpha, int64_t n, cudaStream_t s);
cudaError_t scale(Elem e, void* dst, float alpha, int64_t n, cudaStream_t s);
/// y[r, c] += b[c] for y [rows, cols] (f32).
cudaError_t add_row_bias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t s);
/// y[r, c] = acc[r, c] + b[c] (b null: + 0) for acc [rows, cols] f32, y [rows, cols] in `e`,
/// rounded once.
cudaError_t bias_store(Elem e, const float* acc, const float* b, void* y, int64_t rows, int64_t cols,
                       cudaStream_t s);
/// y[o, k, i] += b[k] for y [outer, channels, inner] in `e` (computed in f32, rounded once).
cudaError_t add_channel_bias(Elem e, void* y, const float* b, int64_t outer, int64_t channels, int64_t inner,
                             cudaStream_t s);
/// dst[i] = src[i] widened to f32 (src in `e`).
cudaError_t widen(Elem e, const void* src, float* dst, int64_t n, cudaStream_t s);
/// out[c] (+)= sum over r of a[r, c] for a [rows, cols] in `e` (summed in double), out f32.
cudaError_t sum_rows(Elem e, const void* a, float* out, int64_t rows, int64_t cols, bool accumulate, cudaStream_t s);

// ---- max pooling (cuda_pool.cu); indices i32 flat h*W + w per plane ----
struct PoolShape {
  int64_t planes, H, W, P, Q, kh, kw, sh, sw, ph, pw;
};
cudaError_t max_pool_forward(Elem e, const void* x, void* y, int32_t* indices, const PoolShape& p, cudaStream_t s);
/// f32: scattered with atomics; bf16/f16: gathered per input element, summed in f32 and
/// rounded once.
cudaError_t max_pool_backward(Elem e, const void* dy, const int32_t* indices, void* dx, const PoolShape& p,
                              cudaStream_t s);
/// y[p] = mean of x[p * hw .. p * hw + hw) for p < planes (one warp per plane, summed in double).
cudaError_t global_avg_pool_forward(Elem e, const void* x, void* y, int64_t planes, int64_t hw, cudaStream_t s);
/// dx[p * hw + i] = dy[p] / hw.
cudaError_t global_avg_pool_backward(Elem e, const void* dy, void* dx, int64_t planes, int64_t hw, cudaStream_t s);

// ---- loss (cuda_loss.cu); labels i64 [N], logits [N, C] ----
/// Sets *bad_row (initialised to UINT64_MAX by the launcher) to the first row whose label is
/// outside [0, C).
cudaError_t check_labels(const int64_t* labels, int64_t n, int64_t c, unsigned long long* bad_row, cudaStream_t s);
/// probs = softmax(logits) (f32); *loss = mean over rows of the smoothed cross-entropy (double).
cudaError_t softmax_xent_forward(Elem e, const void* logits, const int64_t* labels, float* probs, double* row_loss,
                                 double* loss, int64_t n, int64_t c, double smoothing, cudaStream_t s);
/// dlogits in `e` from probs f32.
cudaError_t softmax_xent_backward(Elem e, const float* probs, const int64_t* labels, void* dlogits, int64_t n,
                                  int64_t c, float smoothing, float scale, cudaStream_t s);
cudaError_t count_correct(Elem e, const void* logits, const int64_t* labels, unsigned long long* count, int64_t n,
                          int64_t c, cudaStream_t s);
/// softmax_xent_forward's probs and row_loss [N] (scratch), then one block adds to metrics [4]:
/// sum of row_loss, rows whose argmax equals the label, N, rows with a label outside [0, C).
cudaError_t softmax_xent_accumulate(Elem e, const void* logits, const int64_t* labels, float* probs,
                                    double* row_loss, float* metrics, int64_t n, int64_t c, double smoothing,
                                    cudaStream_t s);

// ---- batch norm over (N, H, W) per channel (cuda_batch_norm.cu); x, y, dy, dx [N, C, HW] in
// `e`, gamma, beta and the statistics f32 ----
struct BnShape {
  int64_t n, c, hw;
};
cudaError_t batch_norm_forward_training(Elem e, const void* x, const float* gamma, const float* beta, void* y,
                                        float* save_mean, float* save_var, float* running_mean, float* running_var,
                                        const BnShape& sh, double eps, double momentum, bool fuse_relu,
                                        cudaStream_t s);
cudaError_t batch_norm_forward_inference(Elem e, const void* x, const float* gamma, const float* beta,
                                         const float* mean, const float* var, void* y, const BnShape& sh, double eps,
                                         bool fuse_relu, cudaStream_t s);
cudaError_t batch_norm_backward(Elem e, const void* dy, const void* x, const float* gamma, const float* save_mean,
                                const float* save_var, const void* y, void* dx, float* dgamma, float* dbeta,
                                const BnShape& sh, double eps, bool accumulate, bool fuse_relu, cudaStream_t s);

// ---- loss scaling and clipping (cuda_amp.cu); state [4] f32 as tandem/amp_ops.h ----
/// The state's indices (ops::AmpState).
constexpr int kAmpScale = 0, kAmpGrowthTracker = 1, kAmpFoundInf = 2, kAmpSkippedSteps = 3;
/// dst = src (f32) * state[0], dst in `e`.
cudaError_t amp_scale(Elem e, const float* src, const float* state, void* dst, int64_t n, cudaStream_t s);
/// state[2] = 0 (before the first amp_unscale_check of a step).
cudaError_t amp_clear_found(float* state, cudaStream_t s);
/// g *= (float)(1 / (double)state[0]); state[2] = 1 when an element of g is inf or NaN.
cudaError_t amp_unscale_check(float* g, float* state, int64_t n, cudaStream_t s);
/// torch._amp_update_scale_ with a floor, on state (one thread).
cudaError_t amp_update_scale(float* state, float growth_factor, float backoff_factor, int64_t growth_interval,
                             float min_scale, cudaStream_t s);
/// Partial sums of squares of g (double) into partials[0 .. kNormBlocks) (fixed order).
constexpr int kNormBlocks = 128;
cudaError_t sum_squares(const float* g, int64_t n, double* partials, cudaStream_t s);
/// norm = sqrt(sum of partials[0 .. count)) in fixed order; total_norm[0] = norm and
/// coef[0] = max_norm / (norm + 1e-6) clamped at 1 (1 for a NaN norm).
cudaError_t clip_coef(const double* partials, int64_t count, double max_norm, float* total_norm, float* coef,
                      cudaStream_t s);
/// g *= coef[0].
cudaError_t scale_by(float* g, const float* coef, int64_t n, cudaStream_t s);

// ---- optimizers (cuda_optim.cu); constants from ops::adam_constants / sgd_constants ----
/// out_kind: 0 no copy, 1 f32, 2 bf16, 3 f16.
cudaError_t adam(float* param, const float* grad, float* m, float* v, void* out, int out_kind, int64_t n,
                 const ops::AdamConstants& c, cudaStream_t s);
cudaError_t sgd(float* param, const float* grad, float* buf, void* out, int out_kind, int64_t n,
                const ops::SgdConstants& c, cudaStream_t s);

}  // namespace tandem::cuda_kernels
