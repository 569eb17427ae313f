// Helpers shared by the nn modules (not public).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "tandem/nn/module.h"
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

/// Fills t with U(-bound, bound) from Philox(seed, index).
inline void uniform_init(const Tensor& t, float bound, uint64_t seed, uint64_t index) {
  if (t.raw_data() == nullptr) return;  // shape-only
  Philox rng(seed, index);
  float* p = t.data<float>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = bound * (2.0f * rng.uniform() - 1.0f);
}

/// Fills t with N(0, stddev^2) from Philox(seed, index) (Box-Muller on pairs of uniforms).
inline void normal_init(const Tensor& t, float stddev, uint64_t seed, uint64_t index) {
  if (t.raw_data() == nullptr) return;  // shape-only
  Philox rng(seed, index);
  float* p = t.data<float>();
  constexpr double kTwoPi = 6.283185307179586;
  for (int64_t i = 0, n = t.numel(); i < n; i += 2) {
    const double u1 = 1.0 - static_cast<double>(rng.uniform()), u2 = rng.uniform();  // u1 in (0, 1]
    const double r = std::sqrt(-2.0 * std::log(u1));
    p[i] = static_cast<float>(stddev * r * std::cos(kTwoPi * u2));
    if (i + 1 < n) p[i + 1] = static_cast<float>(stddev * r * std::sin(kTwoPi * u2));
  }
}

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
