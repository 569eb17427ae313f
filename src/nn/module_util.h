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
inline const Tensor& reuse(Tensor& buf, const Shape& shape, Device device, DType dtype = DType::f32) {
  if (!buf.defined() || buf.shape() != shape || buf.dtype() != dtype || !(buf.device() == device) ||
      buf.storage().use_count() != 1) {
    buf = Tensor::empty(shape, dtype, device);
  }
  return buf;
}

/// A parameter with a zero gradient of the same shape.
inline Parameter make_parameter(const std::string& name, const Shape& shape, bool decay = true) {
  Parameter p;
  p.name = name;
  p.value = Tensor::zeros(shape);
  p.grad = Tensor::zeros(shape);
  p.decay = decay;
  return p;
}

/// Fills t with U(-bound, bound) from Philox(seed, index).
inline void uniform_init(const Tensor& t, float bound, uint64_t seed, uint64_t index) {
  Philox rng(seed, index);
  float* p = t.data<float>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = bound * (2.0f * rng.uniform() - 1.0f);
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
