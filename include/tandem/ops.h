// Compute operations, declared once and implemented per backend (see tandem/backend.h).
// Every op checks its arguments here (dtype, shape, contiguity, one device for all tensors)
// and then runs on the backend of its tensors' device kind; a kind without a backend in this
// build throws Error(not_available, "[<op>] no <kind> backend in this build"), a data dtype
// the backend does not run throws Error(not_available, "[<op>] bf16 is not supported on
// <device>") (ask first with supports(), tandem/op_support.h).
//
// Conventions for every op below:
//  - Tensors are contiguous, row-major (images NCHW), all on one device, except that the
//    image ops (convolution, batch norm, pooling) and the element-wise ops also take 4-D
//    activations in MemoryFormat::channels_last (NHWC in memory, shape still [N, C, H, W])
//    on backends that support it (cpu, virt): the convolutions take any mix of the two
//    formats; batch norm, pooling and the element-wise ops need every activation argument
//    (x, y, dy, dx, a, b, mask, indices) in one format. Elsewhere a channels_last tensor
//    throws Error(invalid_argument, "[<op>] x must be contiguous"). Each op's "data"
//    tensors, marked D below, share one dtype D: f32, bf16 or f16 where the backend supports
//    it (tandem/op_support.h; kernels compute and accumulate in f32 and round once on store,
//    to nearest even). On cpu the bf16 convolutions and matrix products (oneDNN, AVX512-BF16 /
//    AMX dot products) flush subnormal inputs and results (below 2^-126) to zero, where the
//    f32 ones keep them; the element-wise bf16 ops keep subnormals.
//    Tensors not marked D are f32 unless stated (biases, weight gradients, batch-norm
//    parameters and statistics, probabilities, metrics); a dtype mismatch throws
//    Error(invalid_argument, "[<op>] w must be bf16, found f32").
//  - Outputs are passed in already allocated with the documented shape and are overwritten,
//    except where `accumulate` is true: then the result is added to what they hold.
//  - Shapes are written outermost first. Argument errors throw Error(invalid_argument,
//    "[<op>] ...") naming the argument, the expected and the found shape or dtype.
//  - Optional tensors (a bias, a bias gradient) are passed as an undefined Tensor() to omit.
// Thread-safety: ops may be called from several threads at once on distinct outputs; on the
// cpu backend each call uses the OpenMP thread team (see set_num_threads).
#pragma once

#include <cstdint>
#include <string>

#include "tandem/op_support.h"
#include "tandem/tensor.h"

namespace tandem::ops {

// ---------------------------------------------------------------------------------------
// Convolution (cross-correlation, as torch.nn.Conv2d; no dilation, groups = 1).
//   x [N, C, H, W] D, w [K, C, R, S] D, b [K] f32 -> y [N, K, P, Q] D
//   P = (H + 2*pad_h - R) / stride_h + 1,  Q = (W + 2*pad_w - S) / stride_w + 1
struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
};

/// Output shape [N, K, P, Q] for x [N, C, H, W] and w [K, C, R, S]. Throws when C differs,
/// one of C, H, W, K, R, S is 0 (N may be 0; as torch.nn.functional.conv2d), a stride is < 1,
/// a padding < 0 or the padded input is smaller than the kernel.
Shape conv2d_output_shape(const Shape& x, const Shape& w, const Conv2dParams& p);
/// y = conv(x, w) + b (b optional).
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                    const Tensor& y);
/// dx [N, C, H, W] D = gradient of the loss w.r.t. x given dy [N, K, P, Q] D, w D (overwritten).
void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Conv2dParams& p, const Tensor& dx);
/// dw [K, C, R, S] f32 and db [K] f32 (optional) from x and dy (D); added to dw/db when
/// `accumulate`. With bf16 x and dy the f32 gradients are accumulated in f32 and never
/// rounded to bf16, ready for f32 master weights.
void conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Conv2dParams& p,
                             const Tensor& dw, const Tensor& db, bool accumulate);

// ---------------------------------------------------------------------------------------
// Fully connected layer (as torch.nn.Linear):
//   x [N, in] D, w [out, in] D, b [out] f32 -> y [N, out] D = x w^T + b
void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y);
/// dx [N, in] D = dy [N, out] D w [out, in] D (overwritten).
void linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx);
/// dw [out, in] f32 = dy^T x, db [out] f32 = sum over N of dy (optional), from x and dy (D,
/// accumulated in f32); added when `accumulate`.
void linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                             bool accumulate);

// ---------------------------------------------------------------------------------------
// Batch normalization over (N, H, W) per channel (Ioffe & Szegedy 2015; torch.nn.BatchNorm2d):
//   x [N, C, H, W] D, gamma/beta [C], y [N, C, H, W] D; the statistics tensors are [C]; dy
//   and dx are D; gamma, beta, the statistics, dgamma and dbeta are f32 for every D.
//   y = (x - mean) / sqrt(var + eps) * gamma + beta

/// Training mode: normalises with the batch statistics and writes them to save_mean and
/// save_var (biased variance, divisor N*H*W) for the backward pass. When running_mean and
/// running_var are defined they are updated as in PyTorch:
///   running = (1 - momentum) * running + momentum * batch_stat,
/// using the UNBIASED batch variance (divisor N*H*W - 1) for running_var.
/// With fuse_relu, y = max(0, bn(x)) (then pass the same flag to the backward).
void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                 double momentum, const Tensor& y, const Tensor& save_mean,
                                 const Tensor& save_var, const Tensor& running_mean,
                                 const Tensor& running_var, bool fuse_relu = false);
/// Inference mode: normalises with running_mean / running_var (unchanged).
void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& running_mean, const Tensor& running_var, double eps,
                                  const Tensor& y, bool fuse_relu = false);
/// Backward of the training-mode forward: dx [N, C, H, W] (overwritten), dgamma/dbeta [C]
/// (added when `accumulate`). save_mean/save_var are those written by the forward. With
/// fuse_relu, y is the forward's output (its zeros mask the gradient); otherwise y may be
/// undefined.
void batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                         const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma,
                         const Tensor& dbeta, bool accumulate, bool fuse_relu = false,
                         const Tensor& y = Tensor());

// ---------------------------------------------------------------------------------------
// Max pooling (torch.nn.MaxPool2d without dilation or ceil_mode; padding counts as -inf).
//   x [N, C, H, W] D -> y [N, C, P, Q] D, P = (H + 2*pad_h - kernel_h) / stride_h + 1 (same
//   for Q); dy and dx are D.
struct Pool2dParams {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;
};
Shape max_pool2d_output_shape(const Shape& x, const Pool2dParams& p);
/// y = max over each window. When `indices` is defined it must be i32 [N, C, P, Q] and
/// receives, for each output, the flat index h*W + w of the chosen input in its plane
/// (the first maximum in row-major window order, as PyTorch); planes of more than 2^31 - 1
/// elements (H*W) are then refused, here and in the backward.
void max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices);
/// dx [N, C, H, W] (overwritten) scatters dy [N, C, P, Q] to the positions in `indices`.
void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams& p, const Tensor& dx);

// Global average pooling (torch.nn.AdaptiveAvgPool2d(1)):
//   x [N, C, H, W] D -> y [N, C, 1, 1] D, y[n, c] = sum over h, w of x[n, c, h, w] / (H * W),
//   summed in f32. Throws when H or W is 0 or y is not [N, C, 1, 1].
void global_avg_pool2d_forward(const Tensor& x, const Tensor& y);
/// dx [N, C, H, W] D (overwritten) = dy[n, c] / (H * W) at every h, w; dy [N, C, 1, 1] D.
void global_avg_pool2d_backward(const Tensor& dy, const Tensor& dx);

// ---------------------------------------------------------------------------------------
// Element-wise ops on tensors of any shape (same numel where two are given). In-place use
// (an output equal to an input) is allowed. x, y, dy, dx, dst and src are D.

/// y = max(x, 0).
void relu_forward(const Tensor& x, const Tensor& y);
/// dx = dy where y > 0, else 0 (y is the forward's output).
void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx);
/// y = max(a + b, 0) (a ResNet block's residual sum and ReLU in one pass; the backward is
/// relu_backward on y). a, b and y have one shape; y may be a or b.
void add_relu_forward(const Tensor& a, const Tensor& b, const Tensor& y);
/// y = x * mask * scale with mask[i] = 1 when uniform(seed, counter, i) >= p, else 0, and
/// scale = 1 / (1 - p) (inverted dropout, torch.nn.Dropout). The uniforms come from
/// tandem::Philox keyed by (seed, counter), element i taking the i-th draw, so the mask is a
/// pure function of (seed, counter, numel). mask (u8, numel of x) receives the mask.
/// 0 <= p < 1.
void dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter, const Tensor& y,
                     const Tensor& mask);
/// dx = dy * mask * scale.
void dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx);
/// dst += alpha * src (both D).
void add_(const Tensor& dst, const Tensor& src, float alpha = 1.0f);
/// dst *= alpha (D).
void scale_(const Tensor& dst, float alpha);
/// Sets every byte of dst to zero (any dtype on every backend; contiguous). Unlike
/// scale_(dst, 0) it clears NaN and infinity too. On virt and cuda it is enqueued on the device's current stream.
void zero_(const Tensor& dst);

// ---------------------------------------------------------------------------------------
// Memory formats.

/// The layout convolutions on `device` write their [N, K, P, Q] outputs in for data dtype
/// `dtype`, which the layers after them (batch norm, ReLU, pooling, the residual add) keep:
/// channels_last on cpu and virt (oneDNN runs its convolutions, and tandem its batch norm and
/// pooling, on NHWC without reordering, as PyTorch's channels_last path), contiguous on cuda.
/// TANDEM_CHANNELS_LAST=0 in the environment makes it contiguous everywhere (for comparison).
MemoryFormat preferred_memory_format(Device device, DType dtype);
/// dst = src in dst's memory format: same shape and dtype, both dense (contiguous or
/// channels_last). On virt and cuda it is enqueued on the device's current stream.
void convert_memory_format(const Tensor& src, const Tensor& dst);
/// `t` itself when it already is dense in `format`; otherwise a new tensor holding it in
/// `format` (allocated on t's device and written by convert_memory_format).
Tensor to_memory_format(const Tensor& t, MemoryFormat format);

// ---------------------------------------------------------------------------------------
// Softmax cross-entropy (torch.nn.CrossEntropyLoss, reduction='mean'):
//   logits [N, C] D, labels [N] i64 with 0 <= label < C; probs [N, C], the loss and the
//   metrics are f32 for every D (softmax and loss are computed in f32/double); dlogits is D.
//   With label smoothing e the target is q = (1 - e) * onehot(label) + e / C and
//   loss = mean over n of -sum_c q_c log softmax(logits)_c (PyTorch docs, CrossEntropyLoss).

/// Returns the mean loss and writes softmax probabilities to probs [N, C] (for the backward).
/// Throws Error(invalid_argument) for a label outside [0, C), naming it and its row.
float softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                    const Tensor& probs);
/// dlogits [N, C] = (probs - q) * grad_loss / N (overwritten).
void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels, float label_smoothing,
                                    float grad_loss, const Tensor& dlogits);
/// Number of rows n where argmax_c logits[n, c] == labels[n] (first maximum wins).
int64_t count_correct(const Tensor& logits, const Tensor& labels);
/// The loss and accuracy of a batch without a host read-back, for step loops that read their
/// metrics every K steps: writes probs [N, C] as softmax_cross_entropy_forward does and adds
/// to metrics [4] f32 (on the logits' device):
///   metrics[0] += sum over rows of the row loss (the mean loss times N; NaN/inf propagate),
///   metrics[1] += rows whose argmax equals the label (first maximum wins),
///   metrics[2] += N,
///   metrics[3] += rows whose label is outside [0, C) (such a row adds only its smoothing
///                 term to metrics[0]; this op does not throw for it: the reader checks [3]).
/// On virt and cuda it is enqueued on the device's stream and never blocks the host.
void softmax_cross_entropy_accumulate(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                      const Tensor& probs, const Tensor& metrics);

// ---------------------------------------------------------------------------------------
// Threads and versions (cpu backend).

/// Number of threads the cpu kernels use (maps to omp_set_num_threads, for the calling thread);
/// n >= 1, capped at OMP_THREAD_LIMIT (omp_get_thread_limit()). Error(invalid_argument) for n < 1.
void set_num_threads(int n);
/// The calling thread's count: omp_get_max_threads(), capped at OMP_THREAD_LIMIT.
int get_num_threads();
/// One line naming each compute library and its version, e.g.
/// "oneDNN 2.6.3 (cpu, OpenMP runtime, isa avx2)".
std::string backend_versions();

}  // namespace tandem::ops
