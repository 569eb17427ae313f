// Flat optimizer kernels: one update over n contiguous fp32 elements (a parameter tensor or
// a flat master-weight buffer, e.g. in pinned host memory for a CPU-offloaded optimizer).
// Each kernel exists per SIMD level (scalar, avx2, avx512) and is picked at run time; all
// levels compute the same operations in the same order with fused multiply-adds, so they
// give bit-identical results. Large calls are split over OpenMP threads in static,
// contiguous tiles; the result does not depend on the number of threads.
// Thread-safety: the kernels are reentrant (concurrent calls on disjoint buffers are fine);
// set_simd_level() must not race with running kernels.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/dtype.h"

namespace tandem::optim {

/// Instruction-set levels of the kernels. avx2 needs AVX2 + FMA + F16C; avx512 needs
/// AVX-512 F and BW (and uses the AVX-512 BF16 conversion instruction where present).
enum class SimdLevel : uint8_t { scalar, avx2, avx512 };

/// "scalar", "avx2" or "avx512".
const char* simd_level_name(SimdLevel level);
/// Name of the level the kernels use now (for `tandem info`), e.g. "avx2".
const char* simd_level_name();
/// Parses "scalar" | "avx2" | "avx512"; throws Error(invalid_argument) for other names.
SimdLevel parse_simd_level(const std::string& name);
/// Whether this CPU (and build) can run `level`.
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
};

/// The fp32 constants of one Adam update, shared by every backend's kernel so that all give
/// the same bits: step_size = lr/bc1, sqrt_bc2 = sqrt(bc2) (bc1, bc2 in double from the
/// integer step), l2 = weight_decay for Adam-L2 else 0, lr_wd = lr*weight_decay for AdamW
/// else 0.
struct AdamConstants {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, sqrt_bc2, eps, step_size, l2, lr_wd;
};
/// Checks `params` (the adam_step rules; messages start with "[op]") and computes the
/// constants. Throws Error(invalid_argument).
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
/// All buffers hold n elements and must not overlap (except nothing). Throws
/// Error(invalid_argument) for n < 0, step < 1, betas outside [0, 1), negative lr, eps or
/// weight_decay, or an unsupported out_dtype.
void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
               const AdamParams& params, void* out = nullptr, DType out_dtype = DType::f32);

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

/// The fp32 constants of one SGD update, shared by every backend's kernel.
struct SgdConstants {
  float lr, momentum, weight_decay;
  bool nesterov, init_buffer;
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
/// Throws Error(invalid_argument) for n < 0, negative lr, momentum or weight_decay, nesterov
/// without momentum, a null momentum_buffer with momentum != 0, or an unsupported out_dtype.
void sgd_step(float* param, const float* grad, float* momentum_buffer, int64_t n,
              const SgdParams& params, void* out = nullptr, DType out_dtype = DType::f32);

}  // namespace tandem::optim
