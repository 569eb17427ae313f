// The virt ops backend: each op becomes one work item on the current stream of its device,
// running the cpu kernel on host aliases of the virt tensors (virt memory is host memory
// inside). Pending writes order the item after its producers; its outputs get its event.
// Each item carries its modelled cost (virt_cost.h): its FLOPs, given per op here, and the
// bytes of the tensors it touches.
#include "virt_ops.h"

#include <initializer_list>
#include <memory>
#include <vector>

#include "tandem/virt.h"
#include "virt_cost.h"
#include "virt_stream.h"

namespace tandem {
namespace {

using Args = std::vector<Tensor>;

// A host tensor over the same bytes (the caller keeps the original alive); undefined stays so.
Tensor host_alias(const Tensor& t) {
  if (!t.defined()) return Tensor();
  return Tensor::from_blob(t.raw_data(), t.shape(), t.dtype(), Device{}, t.memory_format());
}

using ops::Op;
using virt::conv2d_flops;
using virt::flops_per_element;
using virt::linear_flops;

double numel(const Tensor& t) {
  return static_cast<double>(t.numel());
}

// Enqueues `kernel(cpu_backend(), aliases of ins..., aliases of outs...)` on the current stream
// of the tensors' virt device, modelled as `flops` FLOPs; returns that stream.
template <typename Kernel>
Stream launch(const std::vector<const Tensor*>& ins, const std::vector<const Tensor*>& outs, double flops,
              Kernel kernel) {
  Device dev{DeviceKind::virt, 0};
  for (auto* group : {&ins, &outs})
    for (const Tensor* t : *group)
      if (t->defined()) dev = t->device();
  Stream stream = virt_current_stream(dev.index);
  Args keep, alias;
  virt::OpCost cost{flops, 0};
  for (auto* group : {&ins, &outs}) {
    for (const Tensor* t : *group) {
      if (t->defined()) cost.bytes += static_cast<double>(t->nbytes());
      if (t->defined() && !t->storage()->pending_write().query())
        stream.wait(t->storage()->pending_write());
      keep.push_back(*t);
      alias.push_back(host_alias(*t));
    }
  }
  const int threads = ops::get_num_threads();
  auto* vs = dynamic_cast<virt::VirtStream*>(stream.impl());
  TD_ASSERT(vs != nullptr);
  vs->enqueue_op(
      [keep = std::move(keep), alias = std::move(alias), threads, kernel]() mutable {
        if (ops::get_num_threads() != threads) ops::set_num_threads(threads);
        kernel(ops::cpu_backend(), alias);
      },
      cost);
  if (outs.size()) {
    Event done = stream.record();
    for (const Tensor* t : outs)
      if (t->defined()) t->storage()->set_pending_write(done);
  }
  return stream;
}

// FLOPs of an op counted per element of `t`.
double per_element(Op op, const Tensor& t) {
  return flops_per_element(op) * numel(t);
}

// Rows of a linear layer's input or output gradient [rows, features].
int64_t rows(const Tensor& t) {
  return t.dim() > 0 ? t.shape()[0] : 0;
}

class VirtBackend final : public ops::Backend {
 public:
  const char* name() const override { return "virt"; }
  // The virt backend runs the cpu kernels: it supports what they support.
  bool supports(ops::Op op, DType dtype) const override { return ops::cpu_backend().supports(op, dtype); }
  // virt runs the cpu kernels, layouts included.
  bool supports_channels_last() const override { return true; }
  MemoryFormat preferred_memory_format(DType dtype) const override {
    return ops::cpu_backend().preferred_memory_format(dtype);
  }
  void convert_memory_format(const Tensor& src, const Tensor& dst) override {
    launch({&src}, {&dst}, 0.0, [](Backend& c, Args& a) { c.convert_memory_format(a[0], a[1]); });
  }
  std::string compute_note(DType dtype) const override { return ops::cpu_backend().compute_note(dtype); }

  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const ops::Conv2dParams& p,
                      const Tensor& y) override {
    launch({&x, &w, &b}, {&y}, conv2d_flops(w.shape(), y.shape(), b.defined()),
           [p](Backend& c, Args& a) { c.conv2d_forward(a[0], a[1], a[2], p, a[3]); });
  }
  void conv2d_backward_data(const Tensor& dy, const Tensor& w, const ops::Conv2dParams& p,
                            const Tensor& dx) override {
    launch({&dy, &w}, {&dx}, conv2d_flops(w.shape(), dy.shape(), false),
           [p](Backend& c, Args& a) { c.conv2d_backward_data(a[0], a[1], p, a[2]); });
  }
  void conv2d_backward_weights(const Tensor& x, const Tensor& dy, const ops::Conv2dParams& p,
                               const Tensor& dw, const Tensor& db, bool acc) override {
    launch({&x, &dy}, {&dw, &db}, conv2d_flops(dw.shape(), dy.shape(), db.defined()), [p, acc](Backend& c, Args& a) {
      c.conv2d_backward_weights(a[0], a[1], p, a[2], a[3], acc);
    });
  }

  void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override {
    launch({&x, &w, &b}, {&y}, linear_flops(rows(x), w.shape(), b.defined()),
           [](Backend& c, Args& a) { c.linear_forward(a[0], a[1], a[2], a[3]); });
  }
  void linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) override {
    launch({&dy, &w}, {&dx}, linear_flops(rows(dy), w.shape(), false),
           [](Backend& c, Args& a) { c.linear_backward_data(a[0], a[1], a[2]); });
  }
  void linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw,
                               const Tensor& db, bool acc) override {
    launch({&x, &dy}, {&dw, &db}, linear_flops(rows(x), dw.shape(), db.defined()),
           [acc](Backend& c, Args& a) { c.linear_backward_weights(a[0], a[1], a[2], a[3], acc); });
  }

  void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   double eps, double momentum, const Tensor& y,
                                   const Tensor& save_mean, const Tensor& save_var,
                                   const Tensor& running_mean, const Tensor& running_var,
                                   bool fuse_relu) override {
    launch({&x, &gamma, &beta}, {&y, &save_mean, &save_var, &running_mean, &running_var},
           per_element(Op::batch_norm_forward_training, x),
           [eps, momentum, fuse_relu](Backend& c, Args& a) {
             c.batch_norm_forward_training(a[0], a[1], a[2], eps, momentum, a[3], a[4], a[5], a[6],
                                           a[7], fuse_relu);
           });
  }
  void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& running_mean, const Tensor& running_var,
                                    double eps, const Tensor& y, bool fuse_relu) override {
    launch({&x, &gamma, &beta, &running_mean, &running_var}, {&y}, per_element(Op::batch_norm_forward_inference, x),
           [eps, fuse_relu](Backend& c, Args& a) {
             c.batch_norm_forward_inference(a[0], a[1], a[2], a[3], a[4], eps, a[5], fuse_relu);
           });
  }
  void batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                           const Tensor& save_mean, const Tensor& save_var, double eps,
                           const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, bool acc,
                           bool fuse_relu, const Tensor& y) override {
    launch({&dy, &x, &gamma, &save_mean, &save_var, &y}, {&dx, &dgamma, &dbeta}, per_element(Op::batch_norm_backward, x),
           [eps, acc, fuse_relu](Backend& c, Args& a) {
             c.batch_norm_backward(a[0], a[1], a[2], a[3], a[4], eps, a[6], a[7], a[8], acc,
                                   fuse_relu, a[5]);
           });
  }

  void max_pool2d_forward(const Tensor& x, const ops::Pool2dParams& p, const Tensor& y,
                          const Tensor& indices) override {
    launch({&x}, {&y, &indices}, virt::max_pool2d_forward_flops(y.shape(), p.kernel_h, p.kernel_w),
           [p](Backend& c, Args& a) { c.max_pool2d_forward(a[0], p, a[1], a[2]); });
  }
  void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const ops::Pool2dParams& p,
                           const Tensor& dx) override {
    launch({&dy, &indices}, {&dx}, per_element(Op::max_pool2d_backward, dx),
           [p](Backend& c, Args& a) { c.max_pool2d_backward(a[0], a[1], p, a[2]); });
  }

  void global_avg_pool2d_forward(const Tensor& x, const Tensor& y) override {
    launch({&x}, {&y}, per_element(Op::global_avg_pool2d_forward, x),
           [](Backend& c, Args& a) { c.global_avg_pool2d_forward(a[0], a[1]); });
  }
  void global_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) override {
    launch({&dy}, {&dx}, per_element(Op::global_avg_pool2d_backward, dx),
           [](Backend& c, Args& a) { c.global_avg_pool2d_backward(a[0], a[1]); });
  }
  void add_relu_forward(const Tensor& a, const Tensor& b, const Tensor& y) override {
    launch({&a, &b}, {&y}, per_element(Op::add_relu_forward, y),
           [](Backend& c, Args& t) { c.add_relu_forward(t[0], t[1], t[2]); });
  }

  void relu_forward(const Tensor& x, const Tensor& y) override {
    launch({&x}, {&y}, per_element(Op::relu_forward, x), [](Backend& c, Args& a) { c.relu_forward(a[0], a[1]); });
  }
  void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) override {
    launch({&dy, &y}, {&dx}, per_element(Op::relu_backward, dy),
           [](Backend& c, Args& a) { c.relu_backward(a[0], a[1], a[2]); });
  }
  void dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter, const Tensor& y,
                       const Tensor& mask) override {
    launch({&x}, {&y, &mask}, per_element(Op::dropout_forward, x), [p, seed, counter](Backend& c, Args& a) {
      c.dropout_forward(a[0], p, seed, counter, a[1], a[2]);
    });
  }
  void dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) override {
    launch({&dy, &mask}, {&dx}, per_element(Op::dropout_backward, dy),
           [p](Backend& c, Args& a) { c.dropout_backward(a[0], a[1], p, a[2]); });
  }
  void add_(const Tensor& dst, const Tensor& src, float alpha) override {
    launch({&src}, {&dst}, per_element(Op::add_, dst), [alpha](Backend& c, Args& a) { c.add_(a[1], a[0], alpha); });
  }
  void scale_(const Tensor& dst, float alpha) override {
    launch({}, {&dst}, per_element(Op::scale_, dst), [alpha](Backend& c, Args& a) { c.scale_(a[0], alpha); });
  }
  void zero_(const Tensor& dst) override {
    launch({}, {&dst}, 0, [](Backend& c, Args& a) { c.zero_(a[0]); });
  }

  float softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                      float label_smoothing, const Tensor& probs) override {
    auto loss = std::make_shared<float>(0.0f);
    launch({&logits, &labels}, {&probs}, per_element(Op::softmax_cross_entropy_forward, logits),
           [loss, label_smoothing](Backend& c, Args& a) {
      *loss = c.softmax_cross_entropy_forward(a[0], a[1], label_smoothing, a[2]);
    }).synchronize();
    return *loss;
  }
  void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                      float label_smoothing, float grad_loss,
                                      const Tensor& dlogits) override {
    launch({&probs, &labels}, {&dlogits}, per_element(Op::softmax_cross_entropy_backward, probs),
           [label_smoothing, grad_loss](Backend& c, Args& a) {
      c.softmax_cross_entropy_backward(a[0], a[1], label_smoothing, grad_loss, a[2]);
    });
  }
  int64_t count_correct(const Tensor& logits, const Tensor& labels) override {
    auto n = std::make_shared<int64_t>(0);
    launch({&logits, &labels}, {}, per_element(Op::count_correct, logits), [n](Backend& c, Args& a) {
      *n = c.count_correct(a[0], a[1]);
    }).synchronize();
    return *n;
  }
  void softmax_cross_entropy_accumulate(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                        const Tensor& probs, const Tensor& metrics) override {
    launch({&logits, &labels}, {&probs, &metrics}, per_element(Op::softmax_cross_entropy_accumulate, logits),
           [label_smoothing](Backend& c, Args& a) {
      c.softmax_cross_entropy_accumulate(a[0], a[1], label_smoothing, a[2], a[3]);
    });
  }

  void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const ops::AdamConstants& k, const Tensor& out) override {
    launch({&grad}, {&param, &exp_avg, &exp_avg_sq, &out}, per_element(Op::adam_step, param),
           [k](Backend& c, Args& a) { c.adam_step(a[1], a[0], a[2], a[3], k, a[4]); });
  }
  void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                const ops::SgdConstants& k, const Tensor& out) override {
    launch({&grad}, {&param, &momentum_buffer, &out}, per_element(Op::sgd_step, param),
           [k](Backend& c, Args& a) { c.sgd_step(a[1], a[0], a[2], k, a[3]); });
  }

  void amp_scale(const Tensor& src, const Tensor& state, const Tensor& dst) override {
    launch({&src, &state}, {&dst}, numel(src), [](Backend& c, Args& a) { c.amp_scale(a[0], a[1], a[2]); });
  }
  void amp_unscale_check_(const std::vector<Tensor>& grads, const Tensor& state) override {
    std::vector<const Tensor*> outs{&state};
    double n = 0;
    for (const Tensor& g : grads) outs.push_back(&g), n += numel(g);
    launch({}, outs, 2 * n, [](Backend& c, Args& a) {
      c.amp_unscale_check_(Args(a.begin() + 1, a.end()), a[0]);
    });
  }
  void amp_update_scale_(const Tensor& state, const ops::AmpScaleParams& p) override {
    launch({}, {&state}, 4, [p](Backend& c, Args& a) { c.amp_update_scale_(a[0], p); });
  }
  void clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm, const Tensor& total_norm) override {
    std::vector<const Tensor*> outs{&total_norm};
    double n = 0;
    for (const Tensor& g : grads) outs.push_back(&g), n += numel(g);
    launch({}, outs, 3 * n, [max_norm](Backend& c, Args& a) {
      c.clip_grad_norm_(Args(a.begin() + 1, a.end()), max_norm, a[0]);
    });
  }
  // `fn` reads and writes the touched tensors through their own (host-addressable) pointers.
  void run_if_finite(const Tensor& state, const std::vector<Tensor>& touched, std::function<void()> fn) override {
    std::vector<const Tensor*> outs;
    for (const Tensor& t : touched)
      if (!t.device().is_host()) outs.push_back(&t);
    double n = 0;
    for (const Tensor* t : outs) n += numel(*t);
    launch({&state}, outs, n, [fn = std::move(fn)](Backend& c, Args& a) { c.run_if_finite(a[0], {}, fn); });
  }
};

}  // namespace

ops::Backend& virt_ops_backend() {
  static VirtBackend* b = new VirtBackend();
  return *b;
}

}  // namespace tandem
