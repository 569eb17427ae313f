// The virt ops backend: each op becomes one work item on the current stream of its device,
// running the cpu kernel on host aliases of the virt tensors (virt memory is host memory
// inside). Pending writes order the item after its producers; its outputs get its event.
// Each item carries its modelled cost (virt_cost.h): its FLOPs, counted per op there, and the
// bytes of the tensors it touches. The ops are generated from tandem/op_list.h: the roles of
// the arguments say which tensors are read and which written.
#include "virt_ops.h"

#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tandem/virt.h"
#include "virt_cost.h"
#include "virt_stream.h"

namespace tandem {
namespace {

using ops::Backend;

// A host tensor over the same bytes (the caller keeps the original alive); undefined stays so.
Tensor host_alias(const Tensor& t) {
  if (!t.defined()) return Tensor();
  return Tensor::from_blob(t.raw_data(), t.shape(), t.dtype(), Device{}, t.memory_format());
}

// One op's arguments by role (tandem/op_list.h), as the generated overrides pass them.
struct In {  // a tensor read
  const Tensor& t;
};
struct Out {  // a tensor written (or read and written)
  const Tensor& t;
};
struct Outs {  // tensors read and written
  const std::vector<Tensor>& ts;
};
struct Touched {  // tensors a host function reads and writes; its device ones count as written
  const std::vector<Tensor>& ts;
};
template <typename T>
struct Val {  // a value, copied into the work item
  T v;
};
template <typename T>
Val(T) -> Val<T>;

// What one work item orders itself after and writes, and the tensors it keeps alive.
struct Access {
  std::vector<const Tensor*> ins, outs;
  std::vector<Tensor> keep;
};

void note(Access& a, const In& x) { a.ins.push_back(&x.t), a.keep.push_back(x.t); }
void note(Access& a, const Out& x) { a.outs.push_back(&x.t), a.keep.push_back(x.t); }
void note(Access& a, const Outs& x) {
  for (const Tensor& t : x.ts) a.outs.push_back(&t), a.keep.push_back(t);
}
void note(Access& a, const Touched& x) {
  for (const Tensor& t : x.ts)
    if (!t.device().is_host()) a.outs.push_back(&t);
}
template <typename T>
void note(Access&, const Val<T>&) {}

// The argument as the cpu kernel gets it on the stream thread.
Tensor held(const In& x) { return host_alias(x.t); }
Tensor held(const Out& x) { return host_alias(x.t); }
std::vector<Tensor> held(const Outs& x) {
  std::vector<Tensor> v;
  v.reserve(x.ts.size());
  for (const Tensor& t : x.ts) v.push_back(host_alias(t));
  return v;
}
std::vector<Tensor> held(const Touched& x) { return x.ts; }  // the function uses their own pointers
template <typename T>
T held(const Val<T>& x) {
  return x.v;
}

// Enqueues `body()` on the current stream of the tensors' virt device, after the pending
// writes of every tensor in `a`, modelled as `flops` FLOPs plus the tensors' bytes; marks
// the written tensors with the item's event. Returns the stream.
template <typename Body>
Stream launch(Access a, double flops, Body body) {
  Device dev{DeviceKind::virt, 0};
  for (auto* group : {&a.ins, &a.outs})
    for (const Tensor* t : *group)
      if (t->defined()) dev = t->device();
  Stream stream = virt_current_stream(dev.index);
  virt::OpCost cost{flops, 0};
  for (auto* group : {&a.ins, &a.outs}) {
    for (const Tensor* t : *group) {
      if (t->defined()) cost.bytes += static_cast<double>(t->nbytes());
      if (t->defined() && !t->storage()->pending_write().query()) stream.wait(t->storage()->pending_write());
    }
  }
  const int threads = ops::get_num_threads();
  auto* vs = dynamic_cast<virt::VirtStream*>(stream.impl());
  TD_ASSERT(vs != nullptr);
  vs->enqueue_op(
      [keep = std::move(a.keep), threads, body]() mutable {
        if (ops::get_num_threads() != threads) ops::set_num_threads(threads);
        body();
      },
      cost);
  if (!a.outs.empty()) {
    Event done = stream.record();
    for (const Tensor* t : a.outs)
      if (t->defined()) t->storage()->set_pending_write(done);
  }
  return stream;
}

// One op: `kernel(cpu_backend(), held arguments...)` as a work item. An op that returns a
// host value (the loss, count_correct) waits for its item and returns the value.
template <typename R, typename Kernel, typename... Args>
R run(double flops, Kernel kernel, const Args&... args) {
  Access a;
  a.ins.reserve(sizeof...(Args)), a.outs.reserve(sizeof...(Args)), a.keep.reserve(sizeof...(Args));
  (note(a, args), ...);
  auto call = [kernel, held_args = std::make_tuple(held(args)...)]() mutable {
    return std::apply([&](auto&... h) { return kernel(ops::cpu_backend(), h...); }, held_args);
  };
  if constexpr (std::is_void_v<R>) {
    launch(std::move(a), flops, std::move(call));
  } else {
    auto result = std::make_shared<R>();
    launch(std::move(a), flops, [call = std::move(call), result]() mutable { *result = call(); }).synchronize();
    return *result;
  }
}

class VirtBackend final : public Backend {
 public:
  const char* name() const override { return "virt"; }
  // The virt backend runs the cpu kernels: it supports what they support, layouts included.
  const ops::OpSupport& op_support() const override { return ops::cpu_backend().op_support(); }
  bool supports_channels_last() const override { return true; }
  MemoryFormat preferred_memory_format(DType dtype) const override {
    return ops::cpu_backend().preferred_memory_format(dtype);
  }
  void convert_memory_format(const Tensor& src, const Tensor& dst) override {
    run<void>(0.0, [](Backend& c, const Tensor& s, const Tensor& d) { c.convert_memory_format(s, d); }, In{src},
              Out{dst});
  }
  std::string compute_note(DType dtype) const override { return ops::cpu_backend().compute_note(dtype); }

  // Every op of tandem/op_list.h: the FLOPs of virt_cost.h, then one work item.
#define TANDEM_VIRT_ARG_(role, ...) TANDEM_VIRT_##role(__VA_ARGS__)
#define TANDEM_VIRT_data_in(n) In{n}
#define TANDEM_VIRT_data_out(n) Out{n}
#define TANDEM_VIRT_data_inout(n) Out{n}
#define TANDEM_VIRT_in(n) In{n}
#define TANDEM_VIRT_out(n) Out{n}
#define TANDEM_VIRT_outs(n) Outs{n}
#define TANDEM_VIRT_touched(n) Touched{n}
#define TANDEM_VIRT_val(n, ...) Val{n}
#define TANDEM_VIRT_fn(n) Val{std::move(n)}
#define TANDEM_VIRT_NAME_(role, n, ...) n
#define TANDEM_VIRT_OP_(name, ret)                                                                  \
  ret name(TANDEM_OP_PARAMS(name)) override {                                                       \
    const double td_flops = virt::flops_##name(TANDEM_OP_##name(TANDEM_VIRT_NAME_));                \
    return run<ret>(                                                                                \
        td_flops, [](Backend& td_c, auto&... td_a) -> ret { return td_c.name(td_a...); },           \
        TANDEM_OP_##name(TANDEM_VIRT_ARG_));                                                        \
  }
  TANDEM_OPS(TANDEM_VIRT_OP_)
#undef TANDEM_VIRT_OP_
};

}  // namespace

ops::Backend& virt_ops_backend() {
  static VirtBackend* b = new VirtBackend();
  return *b;
}

}  // namespace tandem
