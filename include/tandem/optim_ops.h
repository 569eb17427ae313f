// Optimizer updates as ops: Adam/AdamW and SGD over flat fp32 tensors on any device, and the
// same kernels on raw host buffers (for a CPU-offloaded optimizer's pinned master weights).
//
// Tensor ops (ops::adam_step / ops::sgd_step on Tensors) check their arguments here and run
// on the backend of the tensors' device, like the ops in tandem/ops.h: on cpu inline, on
// virt as one work item on the device's current stream (ordered after the tensors' pending
// writes), on cuda on the device's default stream. Every backend computes the same
// operations in the same order (fused multiply-adds, IEEE sqrt and division;
// src/backend/optim_element.h), so cpu, virt and cuda give bit-identical results.
//
// The host kernels (pointer overloads) exist per SIMD level (scalar, avx2, avx512), picked at
// run time; all levels give bit-identical results. Large calls are split over OpenMP threads
// in static, contiguous tiles; the result does not depend on the number of threads.
// Thread-safety: the kernels and ops are reentrant (concurrent calls on disjoint buffers are
// fine); set_simd_level() must not race with running kernels.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/dtype.h"
#include "tandem/optim_constants.h"
#include "tandem/tensor.h"

namespace tandem::ops {

// ---- SIMD level of the cpu kernels ----

/// Instruction-set levels of the kernels. avx2 needs AVX2 + FMA + F16C; avx512 needs
/// AVX-512 F and BW (and uses the AVX-512 BF16 conversion instruction where present).
enum class SimdLevel : uint8_t { scalar, avx2, avx512 };

/// "scalar", "avx2" or "avx512".
const char* simd_level_name(SimdLevel level);
/// Name of the level the kernels use now (for `tandem info`), e.g. "avx2".
const char* simd_level_name();
/// Parses "scalar" | "avx2" | "avx512"; throws Error(invalid_argument) for other names.
SimdLevel parse_simd_level(const std::string& name);
/// Whether this CPU (and build) can run `level`, at the level in use (tandem/cpu_isa.h:
/// TANDEM_MAX_CPU_ISA caps it).
bool simd_level_supported(SimdLevel level);
/// The best level this CPU supports.
SimdLevel best_simd_level();
/// The level in use: set_simd_level()'s, else the environment variable TANDEM_SIMD
/// (scalar|avx2|avx512, read once at first use), else best_simd_level(). Throws
/// Error(invalid_argument) when TANDEM_SIMD names no level and Error(not_available) when
/// it names one this CPU lacks.
SimdLevel simd_level();
/// Forces a level for all later kernel calls. Throws Error(not_available) when this CPU
/// does not support it.
void set_simd_level(SimdLevel level);

// ---- Adam / AdamW ----

/// Hyper-parameters of one Adam/AdamW update (torch.optim.Adam / AdamW docs).
struct AdamParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  /// true: AdamW (param *= 1 - lr*weight_decay, from the previous weights, before the Adam
  /// update; Loshchilov & Hutter 2019). false: Adam with L2 (grad += weight_decay*param).
  bool decoupled = false;
  /// 1-based index of this update; the bias corrections 1 - beta^step are computed in double.
  int64_t step = 1;
  /// bf16 moments: the seed of their stochastic rounding (one per parameter; mixed with
  /// `step`, and with each element's index in the kernel). Unused with f32 moments.
  uint32_t rounding_seed = 0;
};

/// Checks `params` (the adam_step rules; messages start with "[op]") and computes the fp32
/// constants every backend's kernel uses (see tandem/optim_constants.h). Throws
/// Error(invalid_argument).
AdamConstants adam_constants(const AdamParams& params, const char* op = "adam_step");

/// One Adam/AdamW update of n elements, in place:
///   g = grad (+ weight_decay*param for Adam-L2)
///   m = beta1*m + (1-beta1)*g ;  v = beta2*v + (1-beta2)*g*g
///   param -= lr*weight_decay*param (AdamW) + lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)
/// with bc1 = 1 - beta1^step, bc2 = 1 - beta2^step (eps is added after the bias correction,
/// as in PyTorch). The AdamW decay is folded into the same rounding as the Adam step, so it
/// is not lost when 1 - lr*weight_decay rounds to 1 in fp32.
/// `out`, when not null, receives a copy of the updated param as `out_dtype` (f32, bf16 or
/// f16, rounded to nearest even like tandem::float_to_bf16/float_to_f16), e.g. for upload.
/// Host memory; all buffers hold n elements and must not overlap. Throws
/// Error(invalid_argument, "[adam_step] ...") for n < 0, step < 1, betas outside [0, 1),
/// negative lr, eps or weight_decay, or an unsupported out_dtype.
void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
               const AdamParams& params, void* out = nullptr, DType out_dtype = DType::f32);

/// The update above on tensors: param, grad f32 and exp_avg, exp_avg_sq both f32 or both bf16
/// (bf16 moments: widened exactly and stored rounded stochastically, unbiased, with a noise
/// from params.rounding_seed, the step and the element's index; host devices only, cuda throws
/// Error(not_available)), contiguous, the same number of elements (any shape) on one device; `out`, when defined, a contiguous f32, bf16
/// or f16 tensor of as many elements on that device. Asynchronous on virt and cuda (see the
/// top of this file); param, exp_avg, exp_avg_sq and out are written. Throws
/// Error(invalid_argument, "[adam_step] ...") naming the tensor for a wrong device, dtype,
/// element count or layout, and for the hyper-parameter errors above (before anything is
/// enqueued); Error(not_available) when the device kind has no backend in this build.
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const AdamParams& params, const Tensor& out = Tensor());

/// adam_step with bf16 moments (bit patterns, n each) in host memory, as the tensor version.
/// Throws as adam_step.
void adam_step_bf16_moments(float* param, const float* grad, uint16_t* exp_avg, uint16_t* exp_avg_sq, int64_t n,
                            const AdamParams& params, void* out = nullptr, DType out_dtype = DType::f32);

// ---- SGD ----

/// Hyper-parameters of one SGD update (torch.optim.SGD docs, dampening 0).
struct SgdParams {
  double lr = 1e-2;
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  /// true on the first update of this parameter: the momentum buffer is set to the
  /// gradient (PyTorch's buf = clone(d_p)) instead of being read.
  bool init_buffer = false;
};

/// Checks `params` (the sgd_step rules, "[op]" messages) and converts them. Throws
/// Error(invalid_argument).
SgdConstants sgd_constants(const SgdParams& params, const char* op = "sgd_step");

/// One SGD update of n elements, in place:
///   d = grad + weight_decay*param
///   buf = init_buffer ? d : momentum*buf + d            (only when momentum != 0)
///   d = nesterov ? d + momentum*buf : buf                (only when momentum != 0)
///   param -= lr*d
/// momentum_buffer may be null when momentum == 0. `out`/`out_dtype` as for adam_step.
/// Throws Error(invalid_argument, "[sgd_step] ...") for n < 0, negative lr, momentum or
/// weight_decay, nesterov without momentum, a null momentum_buffer with momentum != 0, or an
/// unsupported out_dtype.
void sgd_step(float* param, const float* grad, float* momentum_buffer, int64_t n,
              const SgdParams& params, void* out = nullptr, DType out_dtype = DType::f32);

/// The SGD update on tensors, with the rules of the tensor adam_step; momentum_buffer is
/// needed (defined, f32, as many elements) exactly when momentum != 0 and ignored otherwise.
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
              const SgdParams& params, const Tensor& out = Tensor());

// ---- Widening ----

/// dst[i] = src[i] as f32 for n 16-bit floats of `src_dtype` (bf16 or f16 bit patterns),
/// exactly (every bf16 and f16 value, subnormals and inf included, is an f32 value; a NaN stays
/// a NaN, F16C quieting a signalling one): e.g.
/// gradients that came down from a device in low precision, before an f32 optimizer update.
/// Host memory, src and dst must not overlap; at the current SIMD level (shift for bf16, F16C /
/// AVX-512 conversion for f16), in static OpenMP tiles. Throws Error(invalid_argument,
/// "[widen_to_f32] ...") for n < 0, another dtype or a null buffer. Thread-safety: calls on
/// distinct buffers may run concurrently.
void widen_to_f32(const void* src, DType src_dtype, float* dst, int64_t n);

/// dst[i] = src[i] rounded to `dst_dtype` (bf16 or f16 bit patterns), nearest even, bit for bit
/// as tandem::float_to_bf16 / float_to_f16 at every SIMD level (a NaN stays a NaN): e.g. the
/// outputs of an op computed in f32 for a tensor stored in 16 bits. Host memory, no overlap;
/// in static OpenMP tiles. Throws Error(invalid_argument, "[narrow_from_f32] ...") for n < 0,
/// another dtype or a null buffer. Thread-safety: as widen_to_f32.
void narrow_from_f32(const float* src, DType dst_dtype, void* dst, int64_t n);

}  // namespace tandem::ops
