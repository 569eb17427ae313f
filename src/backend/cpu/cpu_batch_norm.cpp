// Batch normalization on oneDNN (plain NCHW): training forward with batch statistics,
// inference forward with running statistics, backward with dgamma/dbeta. The running
// statistics are updated here with PyTorch's momentum rule and unbiased variance.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/dnnl_context.h"

namespace tandem::ops {
namespace {

using dnnl::memory;
using flags = dnnl::normalization_flags;

std::string bn_key(const char* kind, const Shape& xs, double eps, bool fuse_relu) {
  return fmt::format("bn.{} x{} eps{} r{}", kind, shape_str(xs), eps, fuse_relu ? 1 : 0);
}

memory::dims dims_of(const Shape& s) { return memory::dims(s.begin(), s.end()); }

dnnl::batch_normalization_forward::primitive_desc forward_pd(const Shape& xs, double eps, bool training,
                                                              bool fuse_relu) {
  flags f = flags::use_scale | flags::use_shift;
  if (!training) f = f | flags::use_global_stats;
  if (fuse_relu) f = f | flags::fuse_norm_relu;
  dnnl::batch_normalization_forward::desc desc(
      training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, cpu::plain_md(dims_of(xs)),
      static_cast<float>(eps), f);
  return dnnl::batch_normalization_forward::primitive_desc(desc, cpu::engine());
}

struct BnForward : cpu::CacheEntry {
  dnnl::batch_normalization_forward prim;
  memory::desc x_md, c_md;
  memory workspace;  // ReLU mask when fused in training (not needed by our backward)
};

struct BnBackward : cpu::CacheEntry {
  dnnl::batch_normalization_backward prim;
  memory::desc x_md, c_md;
  memory dgamma_tmp, dbeta_tmp, dy_masked;
};

memory wrap(const memory::desc& md, const Tensor& t) { return memory(md, cpu::engine(), t.raw_data()); }

}  // namespace

void CpuBackend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                             double momentum, const Tensor& y, const Tensor& save_mean,
                                             const Tensor& save_var, const Tensor& running_mean,
                                             const Tensor& running_var, bool fuse_relu) {
  auto e = cpu::cached_as<BnForward>(bn_key("fwd_train", x.shape(), eps, fuse_relu), [&] {
    auto pd = forward_pd(x.shape(), eps, true, fuse_relu);
    auto r = std::make_shared<BnForward>();
    r->prim = dnnl::batch_normalization_forward(pd);
    r->x_md = cpu::plain_md(dims_of(x.shape()));
    r->c_md = cpu::plain_md({x.size(1)});
    if (fuse_relu) r->workspace = memory(pd.workspace_desc(), cpu::engine());
    return r;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, wrap(e->x_md, x)},          {DNNL_ARG_DST, wrap(e->x_md, y)},
      {DNNL_ARG_SCALE, wrap(e->c_md, gamma)},    {DNNL_ARG_SHIFT, wrap(e->c_md, beta)},
      {DNNL_ARG_MEAN, wrap(e->c_md, save_mean)}, {DNNL_ARG_VARIANCE, wrap(e->c_md, save_var)}};
  if (fuse_relu) args.emplace(DNNL_ARG_WORKSPACE, e->workspace);
  e->prim.execute(cpu::stream(), args);
  cpu::stream().wait();
  if (running_mean.defined()) {
    const int64_t c = x.size(1);
    const double count = static_cast<double>(x.numel() / c);
    const float m = static_cast<float>(momentum);
    const float unbias = static_cast<float>(count / (count - 1.0));
    float* rm = running_mean.data<float>();
    float* rv = running_var.data<float>();
    const float* mean = save_mean.data<float>();
    const float* var = save_var.data<float>();
    for (int64_t i = 0; i < c; ++i) {
      rm[i] = (1.0f - m) * rm[i] + m * mean[i];
      rv[i] = (1.0f - m) * rv[i] + m * var[i] * unbias;
    }
  }
}

void CpuBackend::batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                              const Tensor& running_mean, const Tensor& running_var, double eps,
                                              const Tensor& y, bool fuse_relu) {
  auto e = cpu::cached_as<BnForward>(bn_key("fwd_infer", x.shape(), eps, fuse_relu), [&] {
    auto pd = forward_pd(x.shape(), eps, false, fuse_relu);
    auto r = std::make_shared<BnForward>();
    r->prim = dnnl::batch_normalization_forward(pd);
    r->x_md = cpu::plain_md(dims_of(x.shape()));
    r->c_md = cpu::plain_md({x.size(1)});
    return r;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  e->prim.execute(cpu::stream(), {{DNNL_ARG_SRC, wrap(e->x_md, x)},
                                  {DNNL_ARG_DST, wrap(e->x_md, y)},
                                  {DNNL_ARG_SCALE, wrap(e->c_md, gamma)},
                                  {DNNL_ARG_SHIFT, wrap(e->c_md, beta)},
                                  {DNNL_ARG_MEAN, wrap(e->c_md, running_mean)},
                                  {DNNL_ARG_VARIANCE, wrap(e->c_md, running_var)}});
  cpu::stream().wait();
}

void CpuBackend::batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                     const Tensor& save_mean, const Tensor& save_var, double eps, const Tensor& dx,
                                     const Tensor& dgamma, const Tensor& dbeta, bool accumulate, bool fuse_relu,
                                     const Tensor& y) {
  auto e = cpu::cached_as<BnBackward>(bn_key("bwd", x.shape(), eps, fuse_relu), [&] {
    auto hint = forward_pd(x.shape(), eps, true, false);
    const memory::desc x_md = cpu::plain_md(dims_of(x.shape()));
    dnnl::batch_normalization_backward::desc desc(dnnl::prop_kind::backward, x_md, x_md, static_cast<float>(eps),
                                                  flags::use_scale | flags::use_shift);
    dnnl::batch_normalization_backward::primitive_desc pd(desc, cpu::engine(), hint);
    auto r = std::make_shared<BnBackward>();
    r->prim = dnnl::batch_normalization_backward(pd);
    r->x_md = x_md;
    r->c_md = cpu::plain_md({x.size(1)});
    r->dgamma_tmp = memory(r->c_md, cpu::engine());
    r->dbeta_tmp = memory(r->c_md, cpu::engine());
    if (fuse_relu) r->dy_masked = memory(x_md, cpu::engine());
    return r;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  memory dy_mem = wrap(e->x_md, dy);
  if (fuse_relu) {
    // The ReLU's gradient mask is y > 0 (y = max(0, bn(x))).
    float* m = static_cast<float*>(e->dy_masked.get_data_handle());
    const float* g = dy.data<float>();
    const float* yp = y.data<float>();
    const int64_t n = dy.numel();
#pragma omp parallel for simd if (n > cpu::kParallelMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) m[i] = yp[i] > 0.0f ? g[i] : 0.0f;
    dy_mem = e->dy_masked;
  }
  memory dg = accumulate ? e->dgamma_tmp : wrap(e->c_md, dgamma);
  memory db = accumulate ? e->dbeta_tmp : wrap(e->c_md, dbeta);
  e->prim.execute(cpu::stream(), {{DNNL_ARG_SRC, wrap(e->x_md, x)},
                                  {DNNL_ARG_DIFF_DST, dy_mem},
                                  {DNNL_ARG_MEAN, wrap(e->c_md, save_mean)},
                                  {DNNL_ARG_VARIANCE, wrap(e->c_md, save_var)},
                                  {DNNL_ARG_SCALE, wrap(e->c_md, gamma)},
                                  {DNNL_ARG_DIFF_SRC, wrap(e->x_md, dx)},
                                  {DNNL_ARG_DIFF_SCALE, dg},
                                  {DNNL_ARG_DIFF_SHIFT, db}});
  cpu::stream().wait();
  if (accumulate) {
    cpu::axpy(dgamma.data<float>(), static_cast<const float*>(dg.get_data_handle()), 1.0f, dgamma.numel());
    cpu::axpy(dbeta.data<float>(), static_cast<const float*>(db.get_data_handle()), 1.0f, dbeta.numel());
  }
}

}  // namespace tandem::ops
