// The cpu backend's dtype table, and whether oneDNN runs bf16 convolutions and matrix
// products natively on this CPU (probed once by building small primitive descriptors). Where
// it does not, and for f16 always (oneDNN 2.6 has no f16 convolution or matmul on the CPU),
// the storage wrapper (cpu_f16.h) runs the table's 16-bit entries through the f32 kernels.
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

namespace {

// Per op, the data dtypes the cpu runs (tandem/op_support.h); every op has an entry.
constexpr DTypes kF32{DType::f32};
constexpr OpSupport kCpuSupport{
    {Op::conv2d_forward, kFloatDTypes},
    {Op::conv2d_backward_data, kFloatDTypes},
    {Op::conv2d_backward_weights, kFloatDTypes},
    {Op::linear_forward, kFloatDTypes},
    {Op::linear_backward_data, kFloatDTypes},
    {Op::linear_backward_weights, kFloatDTypes},
    {Op::batch_norm_forward_training, kFloatDTypes},
    {Op::batch_norm_forward_inference, kFloatDTypes},
    {Op::batch_norm_backward, kFloatDTypes},
    {Op::max_pool2d_forward, kFloatDTypes},
    {Op::max_pool2d_backward, kFloatDTypes},
    {Op::global_avg_pool2d_forward, kFloatDTypes},
    {Op::global_avg_pool2d_backward, kFloatDTypes},
    {Op::relu_forward, kFloatDTypes},
    {Op::relu_backward, kFloatDTypes},
    {Op::add_relu_forward, kFloatDTypes},
    {Op::dropout_forward, kFloatDTypes},
    {Op::dropout_backward, kFloatDTypes},
    {Op::add_, kFloatDTypes},
    {Op::scale_, kFloatDTypes},
    {Op::zero_, DTypes::all()},
    {Op::softmax_cross_entropy_forward, kFloatDTypes},
    {Op::softmax_cross_entropy_backward, kFloatDTypes},
    {Op::count_correct, kFloatDTypes},
    {Op::softmax_cross_entropy_accumulate, kFloatDTypes},
    {Op::adam_step, kF32},  // f32 master state; the out copy is written in any float dtype
    {Op::sgd_step, kF32},
    {Op::amp_scale, kFloatDTypes},
    {Op::amp_unscale_check_, kF32},
    {Op::amp_update_scale_, kF32},
    {Op::clip_grad_norm_, kF32},
    {Op::run_if_finite, kF32},
    // The transformer ops: f32 and bf16 kernels (bf16 native where native_bf16(), else through
    // the storage wrapper, as f16 always).
    {Op::embedding_forward, kFloatDTypes},
    {Op::embedding_backward, kFloatDTypes},
    {Op::layer_norm_forward, kFloatDTypes},
    {Op::layer_norm_backward, kFloatDTypes},
    {Op::gelu_forward, kFloatDTypes},
    {Op::gelu_backward, kFloatDTypes},
    {Op::add_forward, kFloatDTypes},
    {Op::attention_forward, kFloatDTypes},
    {Op::attention_backward, kFloatDTypes},
    {Op::classifier_cross_entropy, kFloatDTypes},
    {Op::linear_in_out_forward, kFloatDTypes},
    {Op::linear_in_out_backward_data, kFloatDTypes},
    {Op::linear_in_out_backward_weights, kFloatDTypes},
};

}  // namespace

const OpSupport& CpuBackend::op_support() const { return kCpuSupport; }

}  // namespace tandem::ops
