// Helpers shared by the nn modules (not public).
#pragma once

#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "tandem/nn/module.h"
#include "tandem/nn/param_init.h"
#include "tandem/rng.h"

namespace tandem::nn::detail {

/// Returns `buf` reshaped for reuse when it already has `shape`/`dtype`/`device` and nobody
/// else holds its storage (so overwriting it cannot change a tensor a caller still reads);
/// otherwise allocates a new tensor into `buf`. Keeps steady-state steps allocation-free.
/// `format` is the memory format the tensor must have (channels_last for 4-D shapes only).
inline const Tensor& reuse(Tensor& buf, const Shape& shape, Device device, DType dtype = DType::f32,
                           MemoryFormat format = MemoryFormat::contiguous) {
  if (!buf.defined() || buf.shape() != shape || buf.dtype() != dtype || !(buf.device() == device) ||
      buf.storage().use_count() != 1 || !buf.is_contiguous(format)) {
    buf = Tensor::empty(shape, dtype, device, format);
  }
  return buf;
}

/// Shape-only construction (nn::make_model_shapes, for the memory plan): while set on this
/// thread, parameters and buffers get their shapes but no memory (a null data pointer) and
/// initialisation writes nothing.
inline thread_local bool shape_only = false;

/// A zero-filled host tensor, or under shape_only one that holds only its shape.
inline Tensor new_tensor(const Shape& shape, DType dtype = DType::f32) {
  return shape_only ? Tensor::from_blob(nullptr, shape, dtype) : Tensor::zeros(shape, dtype);
}

/// Tensor::fill, skipped for a shape-only tensor.
inline void fill(const Tensor& t, double value) {
  if (t.raw_data() != nullptr) Tensor(t).fill(value);
}

/// A parameter with a zero gradient of the same shape.
inline Parameter make_parameter(const std::string& name, const Shape& shape, bool decay = true) {
  Parameter p;
  p.name = name;
  p.value = new_tensor(shape);
  p.grad = new_tensor(shape);
  p.decay = decay;
  return p;
}

/// While set on this thread (make_model_lazy): each parameter's init, by its address.
inline thread_local std::unordered_map<const Parameter*, ParamInit>* recorded_inits = nullptr;

/// Records p's init where asked (recorded_inits) and writes it into p's value unless it is
/// shape-only.
inline void init_parameter(Parameter& p, ParamInit::Kind kind, double scale, uint64_t seed, uint64_t index) {
  const ParamInit init{kind, scale, seed, index};
  if (recorded_inits) (*recorded_inits)[&p] = init;
  if (p.value.raw_data() != nullptr) write_init(init, p.value.numel(), 0, p.value.numel(), p.value.data<float>());
}

/// p's value ~ U(-bound, bound) from Philox(seed, index).
inline void uniform_init(Parameter& p, float bound, uint64_t seed, uint64_t index) {
  init_parameter(p, ParamInit::Kind::uniform, bound, seed, index);
}

/// p's value ~ N(0, stddev^2) from Philox(seed, index) (Box-Muller on pairs of uniforms).
inline void normal_init(Parameter& p, float stddev, uint64_t seed, uint64_t index) {
  init_parameter(p, ParamInit::Kind::normal, stddev, seed, index);
}

/// Every element of p's value `value`.
inline void constant_init(Parameter& p, double value) { init_parameter(p, ParamInit::Kind::constant, value, 0, 0); }

/// `text` with every line after the first indented by two spaces (nested describe()).
inline std::string indent_lines(std::string text) {
  for (size_t p = text.find('\n'); p != std::string::npos; p = text.find('\n', p + 3)) text.replace(p, 1, "\n  ");
  return text;
}

/// Appends a parameter to `out` with its full name.
inline void push_parameter(const std::string& prefix, Parameter& p, std::vector<Parameter*>& out,
                           const std::string& local) {
  p.name = prefix + local;
  out.push_back(&p);
}

/// Throws the standard error for backward() without a training-mode forward().
[[noreturn]] inline void no_forward(const char* op) {
  throw_error(ErrorCode::invalid_argument, op, "backward() called without a preceding training-mode forward()");
}

}  // namespace tandem::nn::detail
