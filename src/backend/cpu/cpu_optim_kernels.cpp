// The cpu backend's flat optimizer kernels: argument checks, fp32 constants, dispatch to the
// SIMD level and static contiguous OpenMP tiles.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_optim_args.h"
#include "tandem/cpu_isa.h"
#include "tandem/error.h"
#include "tandem/optim_ops.h"

namespace tandem::ops {
namespace {

// Below this many elements one thread does the work (a parallel region costs microseconds).
constexpr int64_t kMinParallel = 1 << 16;
// Tiles start on multiples of 16 floats: one 64-byte line when the buffers are aligned.
constexpr int64_t kTileAlign = 16;

// The CPU's AVX512_BF16 conversions, unless TANDEM_MAX_CPU_ISA caps them (tandem/cpu_isa.h).
bool avx512_bf16_insn() {
  static const bool has = cpu_isa() >= CpuIsa::avx512_bf16;
  return has;
}

template <typename Args>
void run_tiled(void (*fn)(const Args&, int64_t, int64_t), const Args& args, int64_t n) {
  if (n < kMinParallel || omp_get_max_threads() == 1 || omp_in_parallel()) {
    fn(args, 0, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads();
    const int64_t tile = (n + nt - 1) / nt;
    const int64_t tile_aligned = (tile + kTileAlign - 1) / kTileAlign * kTileAlign;
    const int64_t begin = std::min(n, omp_get_thread_num() * tile_aligned);
    const int64_t end = std::min(n, begin + tile_aligned);
    if (begin < end) fn(args, begin, end);
  }
}

void check_out_dtype(const char* op, const void* out, DType out_dtype) {
  TD_CHECK_ARG(out == nullptr || out_dtype == DType::f32 || out_dtype == DType::bf16 ||
                   out_dtype == DType::f16,
               op, "output copy dtype must be f32, bf16 or f16, got {}", dtype_name(out_dtype));
}

detail::AdamRangeFn adam_range_fn() {
  switch (simd_level()) {
    case SimdLevel::scalar: break;
    case SimdLevel::avx2: return detail::adam_range_avx2;
    case SimdLevel::avx512:
      return avx512_bf16_insn() ? detail::adam_range_avx512bf16 : detail::adam_range_avx512;
  }
  return detail::adam_range_scalar;
}

detail::SgdRangeFn sgd_range_fn() {
  switch (simd_level()) {
    case SimdLevel::scalar: break;
    case SimdLevel::avx2: return detail::sgd_range_avx2;
    case SimdLevel::avx512:
      return avx512_bf16_insn() ? detail::sgd_range_avx512bf16 : detail::sgd_range_avx512;
  }
  return detail::sgd_range_scalar;
}

detail::WidenRangeFn widen_range_fn() {
  switch (simd_level()) {
    case SimdLevel::scalar: break;
    case SimdLevel::avx2: return detail::widen_range_avx2;
    case SimdLevel::avx512: return detail::widen_range_avx512;
  }
  return detail::widen_range_scalar;
}

detail::NarrowRangeFn narrow_range_fn() {
  switch (simd_level()) {
    case SimdLevel::scalar: break;
    case SimdLevel::avx2: return detail::narrow_range_avx2;
    case SimdLevel::avx512: return detail::narrow_range_avx512;
  }
  return detail::narrow_range_scalar;
}

}  // namespace

void detail::adam_run(const AdamArgs& a, int64_t n) { run_tiled(adam_range_fn(), a, n); }
void detail::sgd_run(const SgdArgs& a, int64_t n) { run_tiled(sgd_range_fn(), a, n); }

AdamConstants adam_constants(const AdamParams& p, const char* op) {
  TD_CHECK_ARG(p.step >= 1, op, "step must be >= 1 (1-based), got {}", p.step);
  TD_CHECK_ARG(p.lr >= 0, op, "lr must be >= 0, got {}", p.lr);
  TD_CHECK_ARG(p.eps >= 0, op, "eps must be >= 0, got {}", p.eps);
  TD_CHECK_ARG(p.weight_decay >= 0, op, "weight_decay must be >= 0, got {}", p.weight_decay);
  TD_CHECK_ARG(p.beta1 >= 0 && p.beta1 < 1 && p.beta2 >= 0 && p.beta2 < 1, op,
               "betas must lie in [0, 1), got ({}, {})", p.beta1, p.beta2);
  const double step = static_cast<double>(p.step);
  const double bc1 = 1.0 - std::pow(p.beta1, step);
  const double bc2 = 1.0 - std::pow(p.beta2, step);
  AdamConstants c{};
  c.beta1 = static_cast<float>(p.beta1);
  c.one_minus_beta1 = static_cast<float>(1.0 - p.beta1);
  c.beta2 = static_cast<float>(p.beta2);
  c.one_minus_beta2 = static_cast<float>(1.0 - p.beta2);
  c.sqrt_bc2 = static_cast<float>(std::sqrt(bc2));
  c.eps = static_cast<float>(p.eps);
  c.step_size = static_cast<float>(p.lr / bc1);
  c.l2 = p.decoupled ? 0.0f : static_cast<float>(p.weight_decay);
  c.lr_wd = p.decoupled ? static_cast<float>(p.lr * p.weight_decay) : 0.0f;
  // A different noise every step and parameter: the seed and the step mixed (splitmix64's
  // finaliser), folded to 32 bits.
  uint64_t z = (static_cast<uint64_t>(p.rounding_seed) << 32 | static_cast<uint32_t>(p.step)) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  c.noise_seed = static_cast<unsigned>((z ^ (z >> 31)) >> 16);
  return c;
}

SgdConstants sgd_constants(const SgdParams& p, const char* op) {
  TD_CHECK_ARG(p.lr >= 0, op, "lr must be >= 0, got {}", p.lr);
  TD_CHECK_ARG(p.momentum >= 0, op, "momentum must be >= 0, got {}", p.momentum);
  TD_CHECK_ARG(p.weight_decay >= 0, op, "weight_decay must be >= 0, got {}", p.weight_decay);
  TD_CHECK_ARG(!p.nesterov || p.momentum > 0, op, "nesterov requires momentum > 0, got {}",
               p.momentum);
  SgdConstants c{};
  c.lr = static_cast<float>(p.lr);
  c.momentum = static_cast<float>(p.momentum);
  c.weight_decay = static_cast<float>(p.weight_decay);
  c.nesterov = p.nesterov;
  c.init_buffer = p.init_buffer;
  return c;
}

// adam_step's checks and the kernel run for the f32 moments (m32, v32) or the bf16 ones (m16, v16).
static void run_adam(float* param, const float* grad, float* m32, float* v32, uint16_t* m16, uint16_t* v16,
                     int64_t n, const AdamParams& p, void* out, DType out_dtype) {
  constexpr const char* op = "adam_step";
  TD_CHECK_ARG(n >= 0, op, "element count must be >= 0, got {}", n);
  const AdamConstants c = adam_constants(p, op);
  check_out_dtype(op, out, out_dtype);
  if (n == 0) return;
  TD_CHECK_ARG(param && grad && ((m32 && v32) || (m16 && v16)), op, "null buffer for {} elements", n);
  detail::AdamArgs a{param, grad, m32, v32, out, out_dtype, c};
  a.exp_avg16 = m16;
  a.exp_avg_sq16 = v16;
  a.seed = c.noise_seed;
  detail::adam_run(a, n);
}

void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
               const AdamParams& p, void* out, DType out_dtype) {
  run_adam(param, grad, exp_avg, exp_avg_sq, nullptr, nullptr, n, p, out, out_dtype);
}

void adam_step_bf16_moments(float* param, const float* grad, uint16_t* exp_avg, uint16_t* exp_avg_sq, int64_t n,
                            const AdamParams& p, void* out, DType out_dtype) {
  run_adam(param, grad, nullptr, nullptr, exp_avg, exp_avg_sq, n, p, out, out_dtype);
}

void sgd_step(float* param, const float* grad, float* momentum_buffer, int64_t n,
              const SgdParams& p, void* out, DType out_dtype) {
  constexpr const char* op = "sgd_step";
  TD_CHECK_ARG(n >= 0, op, "element count must be >= 0, got {}", n);
  const SgdConstants c = sgd_constants(p, op);
  check_out_dtype(op, out, out_dtype);
  if (n == 0) return;
  TD_CHECK_ARG(param && grad, op, "null buffer for {} elements", n);
  TD_CHECK_ARG(p.momentum == 0 || momentum_buffer, op,
               "momentum {} needs a momentum buffer, got null", p.momentum);
  detail::sgd_run({param, grad, p.momentum != 0 ? momentum_buffer : nullptr, out, out_dtype, c}, n);
}

void widen_to_f32(const void* src, DType src_dtype, float* dst, int64_t n) {
  constexpr const char* op = "widen_to_f32";
  TD_CHECK_ARG(n >= 0, op, "element count must be >= 0, got {}", n);
  TD_CHECK_ARG(src_dtype == DType::bf16 || src_dtype == DType::f16, op, "source dtype must be bf16 or f16, got {}",
               dtype_name(src_dtype));
  if (n == 0) return;
  TD_CHECK_ARG(src && dst, op, "null buffer for {} elements", n);
  run_tiled(widen_range_fn(), detail::WidenArgs{static_cast<const uint16_t*>(src), src_dtype, dst}, n);
}

void narrow_from_f32(const float* src, DType dst_dtype, void* dst, int64_t n) {
  constexpr const char* op = "narrow_from_f32";
  TD_CHECK_ARG(n >= 0, op, "element count must be >= 0, got {}", n);
  TD_CHECK_ARG(dst_dtype == DType::bf16 || dst_dtype == DType::f16, op,
               "destination dtype must be bf16 or f16, got {}", dtype_name(dst_dtype));
  if (n == 0) return;
  TD_CHECK_ARG(src && dst, op, "null buffer for {} elements", n);
  run_tiled(narrow_range_fn(), detail::NarrowArgs{src, dst_dtype, static_cast<uint16_t*>(dst)}, n);
}

}  // namespace tandem::ops
