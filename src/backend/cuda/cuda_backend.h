// Internal: the cuda backend of tandem::ops. cuBLAS for linear layers, cuDNN for convolutions,
// own kernels (cuda_kernels.h) for the rest; data dtypes f32, bf16 and f16 (16-bit products on
// tensor cores with f32 accumulation). Every op runs on the calling thread's current stream of
// its tensors' device (the default stream unless a cuda::CurrentStreamGuard is active;
// cuda_device.h) under an NVTX range named after the op, after its arguments' pending writes,
// and marks its outputs with its event (CudaOpScope); ops that return a host value (the loss,
// count_correct) and the label checks synchronise that stream. Methods are defined in the
// cuda_<op>.cpp files.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "tandem/backend.h"

namespace tandem::cuda_detail {
class CudaStream;
}  // namespace tandem::cuda_detail

namespace tandem::ops {

/// The device and stream of one op, open for the object's lifetime: the device of the first
/// defined tensor of `reads` and `writes` is made current, an NVTX range named `op` is open,
/// and the calling thread's current stream of that device is ordered after the pending write
/// of every one of those tensors (Storage::pending_write: a copy or op on another stream; cudaStreamWaitEvent, the
/// host does not wait; events of that stream itself need nothing). When the scope ends
/// normally, the defined tensors of `writes` get an event of the stream as their pending write,
/// so that work on other streams can order itself after the op (Tensor::to does).
/// Undefined tensors are ignored; at most kMaxWrites writes.
struct CudaOpScope {
  static constexpr size_t kMaxWrites = 6;
  CudaOpScope(const char* op, std::initializer_list<const Tensor*> reads, std::initializer_list<const Tensor*> writes);
  ~CudaOpScope();
  CudaOpScope(const CudaOpScope&) = delete;
  CudaOpScope& operator=(const CudaOpScope&) = delete;

  int device;
  cudaStream_t stream;
  cuda_detail::DeviceGuard guard;
  cuda_detail::NvtxRange range;

 private:
  cuda_detail::CudaStream* on_;  // the stream `stream` belongs to
  std::array<const Tensor*, kMaxWrites> writes_{};
  size_t num_writes_ = 0;
  int exceptions_ = 0;  // std::uncaught_exceptions() at construction
};

/// Device addresses of a tensor's data, for kernel arguments: read-only f32, writable f32,
/// writable f32 or null for an undefined tensor, and any element type.
inline const float* in_f32(const Tensor& t) { return static_cast<const float*>(t.raw_data()); }
inline float* out_f32(const Tensor& t) { return static_cast<float*>(t.raw_data()); }
inline float* opt_f32(const Tensor& t) { return t.defined() ? out_f32(t) : nullptr; }
template <typename T>
T* data_ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}
/// The kernels' element type for a data tensor (f32, bf16 or f16; checked by the front end).
inline cuda_kernels::Elem elem(const Tensor& t) {
  return t.dtype() == DType::bf16 ? cuda_kernels::Elem::bf16
         : t.dtype() == DType::f16 ? cuda_kernels::Elem::f16
                                   : cuda_kernels::Elem::f32;
}

/// Scratch device memory from the pool of the calling thread's current stream, returned at
/// scope exit (reuse by later work on the same stream is ordered by the stream).
class CudaScratch {
 public:
  CudaScratch(int device, size_t bytes);
  ~CudaScratch();
  CudaScratch(const CudaScratch&) = delete;
  CudaScratch& operator=(const CudaScratch&) = delete;
  void* get() const { return ptr_; }

 private:
  int device_;
  size_t bytes_;
  void* ptr_;
};

/// A library handle (cuBLAS, cuDNN) of one device and stream, created on first use by
/// `create` (with that device current) and never destroyed; calls on a handle are serialised
/// by holding `mu`, and bind it to the stream (cublasSetStream, cudnnSetStream) under it.
/// One handle per stream, not one per device shared under a lock: a lock orders only the
/// host's calls, while a handle's own device memory (cuBLAS's workspace, cuDNN's internal
/// buffers) is used by the kernels it launched, which on two streams run at the same time.
/// The streams doing ops are few (the default one per device, one per inference replica).
template <typename Handle>
struct StreamHandle {
  std::mutex mu;
  Handle handle{};
};
template <typename Handle, typename Create>
StreamHandle<Handle>& stream_handle(int device, cudaStream_t stream, Create create) {
  static std::mutex table_mu;
  static auto* table = new std::map<std::pair<int, cudaStream_t>, std::unique_ptr<StreamHandle<Handle>>>();
  std::lock_guard<std::mutex> lock(table_mu);
  std::unique_ptr<StreamHandle<Handle>>& h = (*table)[{device, stream}];
  if (!h) {
    auto fresh = std::make_unique<StreamHandle<Handle>>();
    create(&fresh->handle);
    h = std::move(fresh);
  }
  return *h;
}

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "cuda"; }
  /// Every op in f32, bf16 and f16 (adam_step and sgd_step: f32 master state only) and zero_ in
  /// any dtype.
  bool supports(Op op, DType dtype) const override {
    if (dtype == DType::f32 || op == Op::zero_) return true;
    if (op == Op::adam_step || op == Op::sgd_step) return false;
    return dtype == DType::bf16 || dtype == DType::f16;
  }

  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                      const Tensor& y) override;
  void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Conv2dParams& p, const Tensor& dx) override;
  void conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Conv2dParams& p, const Tensor& dw,
                               const Tensor& db, bool accumulate) override;

  void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override;
  void linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) override;
  void linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                               bool accumulate) override;

  void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                   double momentum, const Tensor& y, const Tensor& save_mean,
                                   const Tensor& save_var, const Tensor& running_mean,
                                   const Tensor& running_var, bool fuse_relu) override;
  void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& running_mean, const Tensor& running_var, double eps,
                                    const Tensor& y, bool fuse_relu) override;
  void batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                           const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma,
                           const Tensor& dbeta, bool accumulate, bool fuse_relu, const Tensor& y) override;

  void max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices) override;
  void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams& p,
                           const Tensor& dx) override;

  void global_avg_pool2d_forward(const Tensor& x, const Tensor& y) override;
  void global_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) override;

  void relu_forward(const Tensor& x, const Tensor& y) override;
  void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) override;
  void add_relu_forward(const Tensor& a, const Tensor& b, const Tensor& y) override;
  void dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter, const Tensor& y,
                       const Tensor& mask) override;
  void dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) override;
  void add_(const Tensor& dst, const Tensor& src, float alpha) override;
  void scale_(const Tensor& dst, float alpha) override;
  void zero_(const Tensor& dst) override;

  float softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                      const Tensor& probs) override;
  void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels, float label_smoothing,
                                      float grad_loss, const Tensor& dlogits) override;
  int64_t count_correct(const Tensor& logits, const Tensor& labels) override;
  void softmax_cross_entropy_accumulate(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                        const Tensor& probs, const Tensor& metrics) override;

  void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamConstants& c, const Tensor& out) override;
  void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdConstants& c,
                const Tensor& out) override;

  // Mixed-precision ops (cuda_amp.cpp): kernels on the default stream, no host wait, except
  // run_if_finite, which reads state[kFoundInf] back (the host waits for the step's backward)
  // and then calls fn on the calling thread, where it enqueues the update on the device.
  void amp_scale(const Tensor& src, const Tensor& state, const Tensor& dst) override;
  void amp_unscale_check_(const std::vector<Tensor>& grads, const Tensor& state) override;
  void amp_update_scale_(const Tensor& state, const AmpScaleParams& params) override;
  void clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm, const Tensor& total_norm) override;
  void run_if_finite(const Tensor& state, const std::vector<Tensor>& touched, std::function<void()> fn) override;
};

/// The process-wide cuda backend (registered by create_cuda_runtime()).
Backend& cuda_backend();

}  // namespace tandem::ops
