// Max pooling with explicit argmax indices (i32, flat h*W + w within each plane), so the
// backward is a scatter that any backend can reproduce. Parallel over (N, C) planes.
// The kernels (cpu_pool_impl.h) are built for baseline x86-64 here and for AVX-512 in
// cpu_pool_avx512.cpp, which runs when the CPU has it (cpu_isa.h).
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_pool_impl.h"

namespace tandem::ops {

void CpuBackend::max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y,
                                    const Tensor& indices) {
  if (cpu::has_avx512()) return detail::pool_forward_avx512(x, p, y, indices);
  pool_forward_entry(x, p, y, indices);
}

void CpuBackend::max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams& p,
                                     const Tensor& dx) {
  if (cpu::has_avx512()) return detail::pool_backward_avx512(dy, indices, p, dx);
  pool_backward_entry(dy, indices, dx);
}

}  // namespace tandem::ops
