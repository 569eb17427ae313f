// StorageOnly (cpu_f16.h): each f16 op, and each bf16 op where oneDNN has no bf16 kernels
// here, through its f32 kernel.
#include "backend/cpu/cpu_f16.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <forward_list>
#include <string>
#include <vector>

#include "backend/cpu/cpu_isa.h"
#include "tandem/cpu_isa.h"
#include "tandem/optim_ops.h"

namespace tandem::ops::cpu {
namespace {

// True when t's dtype is stored here but computed in f32: f16 always, bf16 without oneDNN's
// bf16 kernels at the level in use.
bool wide(const Tensor& t) {
  if (!t.defined()) return false;
  return t.dtype() == DType::f16 || (t.dtype() == DType::bf16 && !native_bf16());
}

// Widened copies of an op's 16-bit tensors, and the write-back of its 16-bit outputs on scope exit.
// A tensor that is not widened is handed back as it is (a reference, no copy: an f32 op through
// here allocates nothing); the f32 copies live as long as this object.
class Widen {
 public:
  /// t as f32: a copy for a widened dtype, t itself otherwise (undefined stays undefined).
  const Tensor& in(const Tensor& t) {
    if (!wide(t)) return t;
    Tensor w = Tensor::empty(t.shape(), DType::f32, t.device(), t.memory_format());
    widen_to_f32(t.raw_data(), t.dtype(), w.data<float>(), t.numel());  // SIMD, OpenMP tiles
    return wide_.emplace_front(std::move(w));
  }
  /// An f32 stand-in for output t (widened dtype); `read`: filled from t (in-place and
  /// accumulating ops).
  const Tensor& out(const Tensor& t, bool read = false) {
    if (!wide(t)) return t;
    const Tensor& w =
        read ? in(t) : wide_.emplace_front(Tensor::empty(t.shape(), DType::f32, t.device(), t.memory_format()));
    back_.push_back({t, w});
    return w;
  }
  ~Widen() {  // rounded as float_to_bf16 / float_to_f16, at the SIMD level in use
    for (auto& [dst, src] : back_) narrow_from_f32(src.data<float>(), dst.dtype(), dst.raw_data(), src.numel());
  }

 private:
  std::forward_list<Tensor> wide_;  // stable addresses; allocates only when something is widened
  std::vector<std::pair<Tensor, Tensor>> back_;
};

std::string onednn_version() {
  const dnnl_version_t* v = ::dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

class StorageOnly final : public Backend {
 public:
  explicit StorageOnly(Backend& inner) : b_(inner) {}
  const char* name() const override { return b_.name(); }
  std::string compute_note(DType dtype) const override {
    if (dtype == DType::f16)
      return "f16 stored, computed in f32: oneDNN " + onednn_version() +
             " has no f16 convolution or matmul on this CPU, so f16 runs save memory and bytes moved, not time";
    if (dtype == DType::bf16 && !native_bf16())
      return std::string("bf16 stored, computed in f32: this CPU (") + cpu_isa_name(cpu_isa()) + ") has no bf16 " +
             "instructions oneDNN " + onednn_version() + " uses (it needs avx512), so bf16 runs save memory and " +
             "bytes moved, not time";
    return b_.compute_note(dtype);
  }
  const OpSupport& op_support() const override { return b_.op_support(); }
  bool supports_channels_last() const override { return b_.supports_channels_last(); }
  MemoryFormat preferred_memory_format(DType dtype) const override { return b_.preferred_memory_format(dtype); }
  void convert_memory_format(const Tensor& src, const Tensor& dst) override { b_.convert_memory_format(src, dst); }

  // Every op of tandem/op_list.h: its data_in tensors widened (a widened dtype: an f32 copy,
  // else the tensor itself), data_out ones replaced by f32 stand-ins that are rounded back
  // when the f32 kernel returns, data_inout ones both; other arguments pass as they are.
#define TANDEM_WIDEN_ARG_(role, ...) TANDEM_WIDEN_##role(__VA_ARGS__)
#define TANDEM_WIDEN_data_in(n) td_widen.in(n)
#define TANDEM_WIDEN_data_out(n) td_widen.out(n)
#define TANDEM_WIDEN_data_inout(n) td_widen.out(n, true)
#define TANDEM_WIDEN_in(n) n
#define TANDEM_WIDEN_out(n) n
#define TANDEM_WIDEN_outs(n) n
#define TANDEM_WIDEN_touched(n) n
#define TANDEM_WIDEN_val(n, ...) n
#define TANDEM_WIDEN_fn(n) std::move(n)
#define TANDEM_WIDEN_OP_(name, ret)                      \
  ret name(TANDEM_OP_PARAMS(name)) override {            \
    Widen td_widen;                                      \
    return b_.name(TANDEM_OP_##name(TANDEM_WIDEN_ARG_)); \
  }
  TANDEM_OPS(TANDEM_WIDEN_OP_)
#undef TANDEM_WIDEN_OP_

 private:
  Backend& b_;
};

}  // namespace

Backend& f16_storage_backend(Backend& inner) {
  static StorageOnly* b = new StorageOnly(inner);
  return *b;
}

}  // namespace tandem::ops::cpu
