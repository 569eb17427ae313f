// Convolution on oneDNN: forward, backward-data and backward-weights (+ bias) primitives,
// cached per shape and layout. Weights are plain KCRS; activations are NCHW or NHWC
// (MemoryFormat::channels_last). When any activation of the call is NHWC the primitive runs
// on NHWC activations (oneDNN's channels-last kernels; an NCHW operand, such as a model's
// input images, is reordered in); with only NCHW activations oneDNN picks its preferred
// (blocked) layouts and the operands reorder in and out. Weights always take oneDNN's
// preferred layout and are reordered on each call. x, w, y, dy and dx are f32 or bf16
// (the op's data type `dt`); bias, dw and db are f32 (oneDNN accumulates bf16 products in
// f32 and writes the f32 weight gradients without rounding them to bf16).
#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/cpu_loops.h"
#include "tandem/cpu_isa.h"

namespace tandem::ops {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct ConvDims {
  memory::dims x, w, b, y, strides, pad;
};

ConvDims conv_dims(const Shape& xs, const Shape& ws, const Conv2dParams& p) {
  const Shape ys = conv2d_output_shape(xs, ws, p);
  return {memory::dims(xs.begin(), xs.end()), memory::dims(ws.begin(), ws.end()), memory::dims{ws[0]},
          memory::dims(ys.begin(), ys.end()), memory::dims{p.stride_h, p.stride_w},
          memory::dims{p.pad_h, p.pad_w}};
}

using dtype = memory::data_type;

// Read when a primitive is made (once per shape and layout), so tests can compare layouts in
// one process.
bool force_plain() {
  const char* v = std::getenv("TANDEM_CONV_PLAIN");
  return v && v[0] == '1';
}

// How a call with NHWC activations runs. Below AVX-512, oneDNN 2.6.3's jit:avx2 kernels are
// 20-40% faster on their blocked layout (nChw8c) than on NHWC for the 3x3 convolutions of a
// ResNet (docs/cpu.md has the table), and reordering an activation in and out costs a few
// percent of that, so the NHWC operands are reordered to the blocked layout around the
// primitive. From AVX-512 up the channels-last kernels (brgconv) run on NHWC directly.
// TANDEM_CONV_LAYOUT=nhwc | blocked overrides the choice (for comparison); read when a
// primitive is made.
bool nhwc_kernels() {
  const char* v = std::getenv("TANDEM_CONV_LAYOUT");
  if (v && std::strcmp(v, "nhwc") == 0) return true;
  if (v && std::strcmp(v, "blocked") == 0) return false;
  return cpu_isa() >= CpuIsa::avx512;
}

// The activation layouts of one call: each operand's own, and the primitive's.
struct Layouts {
  bool a_nhwc = false, b_nhwc = false;  // the two activation operands (x/dx and y/dy)
  bool nhwc() const { return a_nhwc || b_nhwc; }
};

Layouts layouts(const Tensor& a, const Tensor& b) {
  return {a.memory_format() == MemoryFormat::channels_last, b.memory_format() == MemoryFormat::channels_last};
}

std::string conv_key(const char* kind, const Shape& xs, const Shape& ws, const Conv2dParams& p, bool bias,
                     DType dt, const Layouts& l) {
  // f32 NCHW keys keep their old form; other data types and layouts append their names.
  return fmt::format("conv.{} x{} w{} s{},{} p{},{} b{}{}{}{}{}", kind, shape_str(xs), shape_str(ws), p.stride_h,
                     p.stride_w, p.pad_h, p.pad_w, bias ? 1 : 0, dt == DType::f32 ? "" : dtype_name(dt),
                     l.nhwc() ? fmt::format(" nhwc{}{}", l.a_nhwc ? 1 : 0, l.b_nhwc ? 1 : 0) : "",
                     force_plain() && !l.nhwc() ? " plain" : "", l.nhwc() && !nhwc_kernels() ? " blk" : "");
}

memory::desc any_md(const memory::dims& d, dtype t) { return memory::desc(d, t, tag::any); }
memory::desc nhwc_md(const memory::dims& d, dtype t) { return memory::desc(d, t, tag::nhwc); }
// An activation operand's own layout.
memory::desc user_md(const memory::dims& d, dtype t, bool nhwc) { return nhwc ? nhwc_md(d, t) : cpu::plain_md(d, t); }

// Layout policy: let oneDNN choose (blocked, fast kernels; reorders at the edges) unless
// TANDEM_CONV_PLAIN=1 forces plain layouts (gemm-based kernels, no reorders).

memory::desc pick_md(const memory::dims& d, dtype t = dtype::f32) {
  return force_plain() ? cpu::plain_md(d, t) : any_md(d, t);
}

// The primitive's layout for an activation: NHWC when the call has an NHWC operand and the
// NHWC kernels are the faster ones here, else oneDNN's choice.
memory::desc act_md(const memory::dims& d, dtype t, const Layouts& l) {
  return l.nhwc() && nhwc_kernels() ? nhwc_md(d, t) : pick_md(d, t);
}

dnnl::convolution_forward::primitive_desc forward_pd(const ConvDims& d, bool bias, dtype t, const Layouts& l) {
  dnnl::convolution_forward::desc desc =
      bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                             act_md(d.x, t, l), pick_md(d.w, t), cpu::plain_md(d.b),
                                             act_md(d.y, t, l), d.strides, d.pad, d.pad)
           : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                             act_md(d.x, t, l), pick_md(d.w, t), act_md(d.y, t, l), d.strides,
                                             d.pad, d.pad);
  return dnnl::convolution_forward::primitive_desc(desc, cpu::primitive_attr(), cpu::engine());
}

struct ConvForward : cpu::CacheEntry {
  dnnl::convolution_forward prim;
  memory::desc scratch_md;
  cpu::Operand x, w, y;
  memory::desc b_md;
};

struct ConvBackwardData : cpu::CacheEntry {
  dnnl::convolution_backward_data prim;
  memory::desc scratch_md;
  cpu::Operand dy, w, dx;
};

struct ConvBackwardWeights : cpu::CacheEntry {
  dnnl::convolution_backward_weights prim;
  memory::desc scratch_md;
  cpu::Operand x, dy, dw;
  memory::desc db_md;
  memory dw_tmp, db_tmp;  // plain scratch when accumulating
};

}  // namespace

void CpuBackend::conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                                const Tensor& y) {
  const bool bias = b.defined();
  const dtype t = cpu::dnnl_type(x.dtype());
  const Layouts l = layouts(x, y);
  auto e = cpu::cached_as<ConvForward>(conv_key("fwd", x.shape(), w.shape(), p, bias, x.dtype(), l), [&] {
    const ConvDims d = conv_dims(x.shape(), w.shape(), p);
    auto pd = forward_pd(d, bias, t, l);
    auto r = std::make_shared<ConvForward>();
    r->prim = dnnl::convolution_forward(pd);
    r->scratch_md = pd.scratchpad_desc();
    r->x.init(user_md(d.x, t, l.a_nhwc), pd.src_desc(), true);
    r->w.init(cpu::plain_md(d.w, t), pd.weights_desc(), true);
    r->y.init(user_md(d.y, t, l.b_nhwc), pd.dst_desc(), false);
    r->b_md = cpu::plain_md(d.b);
    return r;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, e->x.input(x.raw_data())},
                                       {DNNL_ARG_WEIGHTS, e->w.input(w.raw_data())},
                                       {DNNL_ARG_DST, e->y.output(y.raw_data())}};
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(e->b_md, cpu::engine(), b.raw_data()));
  args.emplace(DNNL_ARG_SCRATCHPAD, cpu::scratchpad(e->scratch_md));
  e->prim.execute(cpu::stream(), args);
  e->y.finish_output(y.raw_data());
  cpu::stream().wait();
}

void CpuBackend::conv2d_backward_data(const Tensor& dy, const Tensor& w, const Conv2dParams& p, const Tensor& dx) {
  const dtype t = cpu::dnnl_type(dx.dtype());
  const Layouts l = layouts(dx, dy);
  auto e = cpu::cached_as<ConvBackwardData>(conv_key("bwd_data", dx.shape(), w.shape(), p, false, dx.dtype(), l), [&] {
    const ConvDims d = conv_dims(dx.shape(), w.shape(), p);
    auto hint = forward_pd(d, false, t, l);
    dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, act_md(d.x, t, l),
                                               pick_md(d.w, t), act_md(d.y, t, l), d.strides, d.pad, d.pad);
    dnnl::convolution_backward_data::primitive_desc pd(desc, cpu::primitive_attr(), cpu::engine(), hint);
    auto r = std::make_shared<ConvBackwardData>();
    r->prim = dnnl::convolution_backward_data(pd);
    r->scratch_md = pd.scratchpad_desc();
    r->dy.init(user_md(d.y, t, l.b_nhwc), pd.diff_dst_desc(), true);
    r->w.init(cpu::plain_md(d.w, t), pd.weights_desc(), true);
    r->dx.init(user_md(d.x, t, l.a_nhwc), pd.diff_src_desc(), false);
    return r;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  e->prim.execute(cpu::stream(), {{DNNL_ARG_DIFF_DST, e->dy.input(dy.raw_data())},
                                  {DNNL_ARG_WEIGHTS, e->w.input(w.raw_data())},
                                  {DNNL_ARG_DIFF_SRC, e->dx.output(dx.raw_data())},
                                  {DNNL_ARG_SCRATCHPAD, cpu::scratchpad(e->scratch_md)}});
  e->dx.finish_output(dx.raw_data());
  cpu::stream().wait();
}

void CpuBackend::conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Conv2dParams& p,
                                         const Tensor& dw, const Tensor& db, bool accumulate) {
  const bool bias = db.defined();
  const dtype t = cpu::dnnl_type(x.dtype());
  const Layouts l = layouts(x, dy);
  auto e = cpu::cached_as<ConvBackwardWeights>(conv_key("bwd_w", x.shape(), dw.shape(), p, bias, x.dtype(), l), [&] {
    const ConvDims d = conv_dims(x.shape(), dw.shape(), p);
    auto hint = forward_pd(d, bias, t, l);
    auto desc = bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct,
                                                                 act_md(d.x, t, l), pick_md(d.w),
                                                                 cpu::plain_md(d.b), act_md(d.y, t, l), d.strides,
                                                                 d.pad, d.pad)
                     : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct,
                                                                 act_md(d.x, t, l), pick_md(d.w),
                                                                 act_md(d.y, t, l), d.strides, d.pad, d.pad);
    dnnl::convolution_backward_weights::primitive_desc pd(desc, cpu::primitive_attr(), cpu::engine(), hint);
    auto r = std::make_shared<ConvBackwardWeights>();
    r->prim = dnnl::convolution_backward_weights(pd);
    r->scratch_md = pd.scratchpad_desc();
    r->x.init(user_md(d.x, t, l.a_nhwc), pd.src_desc(), true);
    r->dy.init(user_md(d.y, t, l.b_nhwc), pd.diff_dst_desc(), true);
    r->dw.init(cpu::plain_md(d.w), pd.diff_weights_desc(), false);
    r->db_md = cpu::plain_md(d.b);
    r->dw_tmp = memory(cpu::plain_md(d.w), cpu::engine());
    r->db_tmp = memory(r->db_md, cpu::engine());
    return r;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  // When accumulating, the primitive writes plain scratch that is then added to dw/db.
  void* dw_out = accumulate ? e->dw_tmp.get_data_handle() : dw.raw_data();
  void* db_out = bias ? (accumulate ? e->db_tmp.get_data_handle() : db.raw_data()) : nullptr;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, e->x.input(x.raw_data())},
                                       {DNNL_ARG_DIFF_DST, e->dy.input(dy.raw_data())},
                                       {DNNL_ARG_DIFF_WEIGHTS, e->dw.output(dw_out)}};
  if (bias) args.emplace(DNNL_ARG_DIFF_BIAS, memory(e->db_md, cpu::engine(), db_out));
  args.emplace(DNNL_ARG_SCRATCHPAD, cpu::scratchpad(e->scratch_md));
  e->prim.execute(cpu::stream(), args);
  e->dw.finish_output(dw_out);
  cpu::stream().wait();
  if (accumulate) {
    cpu::axpy(dw.data<float>(), static_cast<const float*>(dw_out), 1.0f, dw.numel());
    if (bias) cpu::axpy(db.data<float>(), static_cast<const float*>(db_out), 1.0f, db.numel());
  }
}

}  // namespace tandem::ops
