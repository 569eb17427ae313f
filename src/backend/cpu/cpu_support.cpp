// The cpu backend's dtype answers: bf16 when oneDNN runs bf16 convolutions and matrix
// products on this CPU (probed once by building small primitive descriptors), f16 never
// (oneDNN 2.6 has no f16 convolution or matmul on the CPU); zero_ takes every dtype. Where
// this answers no for bf16, the storage wrapper (cpu_f16.h) runs bf16 through f32.
#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/dnnl_context.h"
#include "tandem/cpu_isa.h"

namespace tandem::ops {
namespace {

using dnnl::memory;

// True when oneDNN builds the bf16 primitives the cpu backend uses: convolution forward,
// backward data and weights (f32 bias and weight gradients) and matmul with bf16 or f32 output.
bool probe_bf16() {
  try {
    const auto bf = memory::data_type::bf16, f = memory::data_type::f32;
    const memory::dims x{2, 3, 8, 8}, w{4, 3, 3, 3}, b{4}, y{2, 4, 6, 6}, s{1, 1}, p{0, 0};
    auto any = [](const memory::dims& d, memory::data_type t) {
      return memory::desc(d, t, memory::format_tag::any);
    };
    const dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                             any(x, bf), any(w, bf), any(b, f), any(y, bf), s, p, p);
    const dnnl::convolution_forward::primitive_desc fpd(fd, cpu::engine());
    const dnnl::convolution_backward_data::desc dd(dnnl::algorithm::convolution_direct, any(x, bf), any(w, bf),
                                                   any(y, bf), s, p, p);
    const dnnl::convolution_backward_data::primitive_desc dpd(dd, cpu::engine(), fpd);
    const dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_direct, any(x, bf), any(w, f),
                                                      any(b, f), any(y, bf), s, p, p);
    const dnnl::convolution_backward_weights::primitive_desc wpd(wd, cpu::engine(), fpd);
    for (auto out : {bf, f}) {
      const dnnl::matmul::desc md(memory::desc({4, 5}, bf, memory::format_tag::ab),
                                  memory::desc({5, 6}, bf, memory::format_tag::ba),
                                  memory::desc({4, 6}, out, memory::format_tag::ab));
      const dnnl::matmul::primitive_desc mpd(md, cpu::engine());
    }
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace

// oneDNN's bf16 kernels need avx512_core at least (emulated there; native with avx512_bf16 / AMX).
bool cpu::native_bf16() {
  static const bool ok = cpu_isa() >= CpuIsa::avx512 && probe_bf16();
  return ok;
}

bool CpuBackend::supports(Op op, DType dtype) const {
  if (op == Op::zero_ || dtype == DType::f32) return true;
  if (op == Op::adam_step || op == Op::sgd_step) return false;  // f32 master state only
  return dtype == DType::bf16 && cpu::native_bf16();
}

}  // namespace tandem::ops
