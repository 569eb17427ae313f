// cuda backend: convolutions with cuDNN (legacy descriptor API). f32: FP32 with FMA math (no
// TF32), so results agree with the CPU within float rounding. bf16 / f16: x, w, y (dy, dx) as
// CUDNN_DATA_BFLOAT16 / CUDNN_DATA_HALF with an f32 convolution descriptor (cuDNN's
// PSEUDO_BFLOAT16 / PSEUDO_HALF configurations: f32 accumulation, one rounding on store) and
// CUDNN_TENSOR_OP_MATH (tensor cores); the f32 bias is added by an own kernel after the
// convolution's rounding (y is rounded twice where there is a bias). The weight gradient is
// f32 (tandem/ops.h), which the legacy API does not write from 16-bit inputs, so
// backward-weights widens x and dy to f32 scratch and runs the f32 convolution. Algorithms
// come from cuDNN's heuristics (the *_v7 queries); a candidate cuDNN rejects at run time (any
// NOT_SUPPORTED sub-code, BAD_PARAM_SIZE_INSUFFICIENT) or whose workspace cannot be allocated
// is skipped for the next (conv_candidates.h). A build without cuDNN throws
// Error(not_available) from these ops.
#include "backend/cuda/cuda_backend.h"

#if TANDEM_HAVE_CUDNN
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <climits>

#include "backend/cuda/conv_candidates.h"
#include "backend/cuda/cuda_kernels.h"

#define TD_CUDNN(call)                                                                                  \
  do {                                                                                                  \
    const cudnnStatus_t td_st_ = (call);                                                                \
    if (td_st_ != CUDNN_STATUS_SUCCESS)                                                                 \
      ::tandem::cuda_detail::throw_library_error(                                                       \
          ::tandem::cuda_detail::cudnn_error_code(static_cast<int>(td_st_)), "cudnn", #call,              \
          static_cast<int>(td_st_), cudnnGetErrorString(td_st_));                                         \
  } while (0)

namespace tandem::ops {
namespace {

StreamHandle<cudnnHandle_t>& dnn(const CudaOpScope& s) {
  return stream_handle<cudnnHandle_t>(s.device, s.stream, [](cudnnHandle_t* h) { TD_CUDNN(cudnnCreate(h)); });
}

int to_int(const char* op, int64_t v) {
  TD_CHECK_ARG(v >= 0 && v <= INT_MAX, op, "dimension {} does not fit cuDNN's 32-bit descriptors", v);
  return static_cast<int>(v);
}

// The descriptors of one convolution: x [N, C, H, W], w [K, C, R, S], y [N, K, P, Q], bias [1, K, 1, 1].
struct ConvDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  ConvDescs(const char* op, const Shape& xs, const Shape& ws, const Shape& ys, const Conv2dParams& p, DType dtype) {
    const cudnnDataType_t t = dtype == DType::bf16  ? CUDNN_DATA_BFLOAT16
                              : dtype == DType::f16 ? CUDNN_DATA_HALF
                                                    : CUDNN_DATA_FLOAT;
    TD_CUDNN(cudnnCreateTensorDescriptor(&x));
    TD_CUDNN(cudnnCreateTensorDescriptor(&y));
    TD_CUDNN(cudnnCreateTensorDescriptor(&bias));
    TD_CUDNN(cudnnCreateFilterDescriptor(&w));
    TD_CUDNN(cudnnCreateConvolutionDescriptor(&conv));
    TD_CUDNN(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, t, to_int(op, xs[0]), to_int(op, xs[1]),
                                        to_int(op, xs[2]), to_int(op, xs[3])));
    TD_CUDNN(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, t, to_int(op, ys[0]), to_int(op, ys[1]),
                                        to_int(op, ys[2]), to_int(op, ys[3])));
    TD_CUDNN(cudnnSetTensor4dDescriptor(bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, to_int(op, ws[0]), 1, 1));
    TD_CUDNN(cudnnSetFilter4dDescriptor(w, t, CUDNN_TENSOR_NCHW, to_int(op, ws[0]), to_int(op, ws[1]),
                                        to_int(op, ws[2]), to_int(op, ws[3])));
    TD_CUDNN(cudnnSetConvolution2dDescriptor(conv, to_int(op, p.pad_h), to_int(op, p.pad_w), to_int(op, p.stride_h),
                                             to_int(op, p.stride_w), 1, 1, CUDNN_CROSS_CORRELATION,
                                             CUDNN_DATA_FLOAT));
    // The bias descriptor (f32 path only) stays f32; the convolution computes in f32.
    TD_CUDNN(cudnnSetConvolutionMathType(conv, t == CUDNN_DATA_FLOAT ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  }
  ~ConvDescs() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(bias);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }
  ConvDescs(const ConvDescs&) = delete;
  ConvDescs& operator=(const ConvDescs&) = delete;
};

// cuDNN's values behind the CUDA-free constants of library_status.h.
static_assert(cuda_detail::cudnn_status::bad_param_size_insufficient == CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT);
static_assert(cuda_detail::cudnn_status::not_supported == CUDNN_STATUS_NOT_SUPPORTED);
static_assert(cuda_detail::cudnn_category(CUDNN_STATUS_NOT_SUPPORTED_SHAPE) == CUDNN_STATUS_NOT_SUPPORTED);
static_assert(cuda_detail::cudnn_category(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE) ==
              CUDNN_STATUS_NOT_SUPPORTED);
static_assert(cuda_detail::cudnn_status::host_allocation_failed == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED);
static_assert(cuda_detail::cudnn_status::device_allocation_failed ==
              CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED);
static_assert(cuda_detail::cudnn_status::sublibrary_version_mismatch == CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH);
static_assert(cuda_detail::cudnn_status::sublibrary_loading_failed == CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED);
static_assert(cuda_detail::cudnn_status::not_supported_incompatible_driver ==
              CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER);
static_assert(cuda_detail::cudnn_status::not_supported_incompatible_cudart ==
              CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART);
static_assert(cuda_detail::cudnn_status::not_supported_arch_mismatch == CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH);
static_assert(cuda_detail::cudnn_status::not_supported_sublibrary_unavailable ==
              CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE);
static_assert(cuda_detail::cudnn_status::execution_failed == CUDNN_STATUS_EXECUTION_FAILED);

// Runs `run(algo, workspace, bytes)` over the heuristics' candidates in order until one runs
// (cuda_detail::run_candidates: rejected algorithms and unallocatable workspaces move on);
// throws when none does.
template <typename Perf, typename Run>
void run_candidates(const char* call, const Perf* perf, int count, int device, Run run) {
  std::array<cuda_detail::ConvCandidate, 16> c{};
  const int n = std::min<int>(count, static_cast<int>(c.size()));
  for (int i = 0; i < n; ++i)
    c[static_cast<size_t>(i)] = {static_cast<int>(perf[i].algo), static_cast<int>(perf[i].status), perf[i].memory};
  using Algo = decltype(perf[0].algo);
  const cuda_detail::CandidateOutcome o = cuda_detail::run_candidates(
      c.data(), n, [device](size_t bytes) { return CudaScratch(device, bytes); },
      [&run](int algo, void* ws, size_t bytes) { return static_cast<int>(run(static_cast<Algo>(algo), ws, bytes)); });
  if (o.accepted >= 0) return;
  cuda_detail::throw_no_candidate(call, o, cudnnGetErrorString(static_cast<cudnnStatus_t>(o.status)));
}

const float kOne = 1.0f, kZero = 0.0f;

}  // namespace

void CudaBackend::conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                                 const Tensor& y) {
  constexpr const char* op = "conv2d_forward";
  CudaOpScope s(op, {&x, &w, &b}, {&y});
  ConvDescs d(op, x.shape(), w.shape(), y.shape(), p, x.dtype());
  auto& h = dnn(s);
  std::lock_guard<std::mutex> lock(h.mu);
  TD_CUDNN(cudnnSetStream(h.handle, s.stream));
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
  int count = 0;
  TD_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(h.handle, d.x, d.w, d.conv, d.y, static_cast<int>(perf.size()),
                                                  &count, perf.data()));
  run_candidates("cudnnConvolutionForward", perf.data(), count, s.device,
                 [&](cudnnConvolutionFwdAlgo_t algo, void* ws, size_t bytes) {
                   return cudnnConvolutionForward(h.handle, &kOne, d.x, x.raw_data(), d.w, w.raw_data(), d.conv, algo,
                                                  ws, bytes, &kZero, d.y, y.raw_data());
                 });
  if (!b.defined()) return;
  if (x.dtype() == DType::f32) {
    TD_CUDNN(cudnnAddTensor(h.handle, &kOne, d.bias, b.raw_data(), &kOne, d.y, y.raw_data()));
    return;
  }
  TD_CUDA(cuda_kernels::add_channel_bias(elem(y), y.raw_data(), in_f32(b), y.size(0), y.size(1),
                                         y.size(2) * y.size(3), s.stream));
}

void CudaBackend::conv2d_backward_data(const Tensor& dy, const Tensor& w, const Conv2dParams& p, const Tensor& dx) {
  constexpr const char* op = "conv2d_backward_data";
  CudaOpScope s(op, {&dy, &w}, {&dx});
  ConvDescs d(op, dx.shape(), w.shape(), dy.shape(), p, dy.dtype());
  auto& h = dnn(s);
  std::lock_guard<std::mutex> lock(h.mu);
  TD_CUDNN(cudnnSetStream(h.handle, s.stream));
  std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
  int count = 0;
  TD_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h.handle, d.w, d.y, d.conv, d.x, static_cast<int>(perf.size()),
                                                       &count, perf.data()));
  run_candidates("cudnnConvolutionBackwardData", perf.data(), count, s.device,
                 [&](cudnnConvolutionBwdDataAlgo_t algo, void* ws, size_t bytes) {
                   return cudnnConvolutionBackwardData(h.handle, &kOne, d.w, w.raw_data(), d.y, dy.raw_data(), d.conv,
                                                       algo, ws, bytes, &kZero, d.x, dx.raw_data());
                 });
}

void CudaBackend::conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Conv2dParams& p, const Tensor& dw,
                                          const Tensor& db, bool accumulate) {
  constexpr const char* op = "conv2d_backward_weights";
  CudaOpScope s(op, {&x, &dy}, {&dw, &db});
  ConvDescs d(op, x.shape(), dw.shape(), dy.shape(), p, DType::f32);
  // bf16 / f16: x and dy widened to f32 (exact), the f32 convolution writes the f32 dw.
  const bool widen = x.dtype() != DType::f32;
  CudaScratch xw(s.device, widen ? static_cast<size_t>(x.numel()) * sizeof(float) : 0);
  CudaScratch dyw(s.device, widen ? static_cast<size_t>(dy.numel()) * sizeof(float) : 0);
  const void* xp = x.raw_data();
  const void* dyp = dy.raw_data();
  if (widen) {
    TD_CUDA(cuda_kernels::widen(elem(x), x.raw_data(), static_cast<float*>(xw.get()), x.numel(), s.stream));
    TD_CUDA(cuda_kernels::widen(elem(dy), dy.raw_data(), static_cast<float*>(dyw.get()), dy.numel(), s.stream));
    xp = xw.get();
    dyp = dyw.get();
  }
  auto& h = dnn(s);
  std::lock_guard<std::mutex> lock(h.mu);
  TD_CUDNN(cudnnSetStream(h.handle, s.stream));
  const float beta = accumulate ? 1.0f : 0.0f;
  std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
  int count = 0;
  TD_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h.handle, d.x, d.y, d.conv, d.w,
                                                         static_cast<int>(perf.size()), &count, perf.data()));
  run_candidates("cudnnConvolutionBackwardFilter", perf.data(), count, s.device,
                 [&](cudnnConvolutionBwdFilterAlgo_t algo, void* ws, size_t bytes) {
                   return cudnnConvolutionBackwardFilter(h.handle, &kOne, d.x, xp, d.y, dyp,
                                                         d.conv, algo, ws, bytes, &beta, d.w, dw.raw_data());
                 });
  if (db.defined())
    TD_CUDNN(cudnnConvolutionBackwardBias(h.handle, &kOne, d.y, dyp, &beta, d.bias, db.raw_data()));
}

}  // namespace tandem::ops

#else  // no cuDNN in this build

namespace tandem::ops {
namespace {
[[noreturn]] void no_cudnn(const char* op) {
  throw_error(ErrorCode::not_available, op, "this build's CUDA backend has no cuDNN (cudnn.h was not found)");
}
}  // namespace

void CudaBackend::conv2d_forward(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&, const Tensor&) {
  no_cudnn("conv2d_forward");
}
void CudaBackend::conv2d_backward_data(const Tensor&, const Tensor&, const Conv2dParams&, const Tensor&) {
  no_cudnn("conv2d_backward_data");
}
void CudaBackend::conv2d_backward_weights(const Tensor&, const Tensor&, const Conv2dParams&, const Tensor&,
                                          const Tensor&, bool) {
  no_cudnn("conv2d_backward_weights");
}

}  // namespace tandem::ops
#endif
