// The cpu backend's dtype table, and whether oneDNN runs bf16 convolutions and matrix
// products natively on this CPU (probed once by building small primitive descriptors). Where
// it does not, and for f16 always (oneDNN 2.6 has no f16 convolution or matmul on the CPU),
// the storage wrapper (cpu_f16.h) runs the table's 16-bit entries through the f32 kernels.
#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/op_support_default.h"
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

namespace {

// Per op, the data dtypes the cpu runs (tandem/op_support.h): the shared default
// (op_support_default.h). bf16 runs natively where native_bf16(), else through the storage
// wrapper, as f16 always; the optimizer updates, the scaler's steps and clipping are f32 only,
// zero_ runs in every dtype.
constexpr OpSupport kCpuSupport = kDefaultOpSupport;

}  // namespace

const OpSupport& CpuBackend::op_support() const { return kCpuSupport; }

}  // namespace tandem::ops
