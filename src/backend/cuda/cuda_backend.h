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
#include "backend/cuda/cuda_support.h"
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
  /// The cuda table (cuda_support.h).
  const OpSupport& op_support() const override { return kCudaSupport; }

  /// Every op of tandem/op_list.h, defined in the cuda_<op>.cpp files. The mixed-precision
  /// ops (cuda_amp.cpp) run kernels on the default stream without a host wait, except
  /// run_if_finite, which reads state[kFoundInf] back (the host waits for the step's
  /// backward) and then calls fn on the calling thread, where it enqueues the update.
  /// The transformer ops (cuda_embedding, _layer_norm, _gelu, _attention, _classifier_loss)
  /// have the cpu kernels' semantics, except that ids and targets are not read on the host (an
  /// embedding id outside [0, V) gives a zero row and no gradient; the classifier counts bad
  /// targets in metrics[3] as the cpu does), attention needs a head dimension C / H <= 128
  /// (Error(not_available) otherwise) and the classifier makes its logits in blocks of at most
  /// 128 MiB of f32 scratch.
  TANDEM_OPS(TANDEM_OP_DECLARE_OVERRIDE)
};

/// The process-wide cuda backend (registered by create_cuda_runtime()).
Backend& cuda_backend();

}  // namespace tandem::ops
