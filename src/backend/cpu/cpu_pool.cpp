// Max pooling with explicit argmax indices (i32, flat h*W + w within each plane), so the
// backward is a scatter that any backend can reproduce; global average pooling
// (AdaptiveAvgPool2d(1)) summed in f32. NCHW tensors run per (N, C) plane (cpu_pool_impl.h);
// channels_last ones run on NHWC directly, vectorised across each pixel's channels
// (cpu_pool_nhwc_impl.h), with the same results as the NCHW kernels.
// The kernels are built for baseline x86-64 here and for AVX-512 in cpu_pool_avx512.cpp,
// which runs when the CPU has it (cpu_isa.h).
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_pool_impl.h"
#include "backend/cpu/cpu_pool_nhwc_impl.h"

namespace tandem::ops {
namespace {

template <typename T>
void mean_planes(const T* x, T* y, int64_t planes, int64_t hw) {
  const float inv = 1.0f / static_cast<float>(hw);
#pragma omp parallel for if (planes * hw > cpu::kParallelMin) schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const T* src = x + p * hw;
    // Eight partial sums (positions i mod 8), combined by sum8 as in mean_nhwc.
    float s[8] = {};
    int64_t i = 0;
    for (; i + 8 <= hw; i += 8)
#pragma omp simd
      for (int64_t j = 0; j < 8; ++j) s[j] += ld(src[i + j]);
    for (; i < hw; ++i) s[i % 8] += ld(src[i]);
    y[p] = st(sum8(s) * inv, y);
  }
}

template <typename T>
void spread_planes(const T* dy, T* dx, int64_t planes, int64_t hw) {
  const float inv = 1.0f / static_cast<float>(hw);
#pragma omp parallel for if (planes * hw > cpu::kParallelMin) schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const T v = st(ld(dy[p]) * inv, dx);
    T* dst = dx + p * hw;
#pragma omp simd
    for (int64_t i = 0; i < hw; ++i) dst[i] = v;
  }
}

}  // namespace

void CpuBackend::max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y,
                                    const Tensor& indices) {
  if (x.memory_format() == MemoryFormat::channels_last) {
    if (cpu::has_avx512()) return detail::pool_nhwc_forward_avx512(x, p, y, indices);
    return pool_nhwc_forward_entry(x, p, y, indices);
  }
  if (cpu::has_avx512()) return detail::pool_forward_avx512(x, p, y, indices);
  pool_forward_entry(x, p, y, indices);
}

void CpuBackend::max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams& p,
                                     const Tensor& dx) {
  if (dx.memory_format() == MemoryFormat::channels_last) {
    if (cpu::has_avx512()) return detail::pool_nhwc_backward_avx512(dy, indices, p, dx);
    return pool_nhwc_backward_entry(dy, indices, p, dx);
  }
  if (cpu::has_avx512()) return detail::pool_backward_avx512(dy, indices, p, dx);
  pool_backward_entry(dy, indices, dx);
}

void CpuBackend::global_avg_pool2d_forward(const Tensor& x, const Tensor& y) {
  if (x.memory_format() == MemoryFormat::channels_last) {
    if (cpu::has_avx512()) return detail::mean_nhwc_avx512(x, y);
    return mean_nhwc_entry(x, y);
  }
  cpu::by_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    mean_planes(cpu::elems<T>(x), cpu::elems<T>(y), x.size(0) * x.size(1), x.size(2) * x.size(3));
  });
}

void CpuBackend::global_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) {
  if (dx.memory_format() == MemoryFormat::channels_last) {
    if (cpu::has_avx512()) return detail::spread_nhwc_avx512(dy, dx);
    return spread_nhwc_entry(dy, dx);
  }
  cpu::by_dtype(dx.dtype(), [&](auto t) {
    using T = decltype(t);
    spread_planes(cpu::elems<T>(dy), cpu::elems<T>(dx), dx.size(0) * dx.size(1), dx.size(2) * dx.size(3));
  });
}

}  // namespace tandem::ops
