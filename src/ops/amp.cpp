// Front end of the mixed-precision ops (tandem/amp_ops.h): checks, then the backend of the
// state's (or the grads') device.
#include <cmath>

#include "ops/op_checks.h"

namespace tandem::ops {

using detail::expect;

namespace {

void expect_state(const char* op, const Tensor& state) { expect(op, "state", state, {kAmpStateSize}, DType::f32); }

// Every defined grad: contiguous f32 on `device`.
void expect_grads(const char* op, const std::vector<Tensor>& grads, Device device) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    TD_CHECK_ARG(g.dtype() == DType::f32 && g.is_contiguous(), op,
                 "grads[{}] must be a contiguous f32 tensor, found {} {}", i, dtype_name(g.dtype()),
                 shape_str(g.shape()));
    TD_CHECK_ARG(g.device() == device, op, "grads[{}] is on {}, expected {}", i, g.device().str(), device.str());
  }
}

}  // namespace

void amp_scale(const Tensor& src, const Tensor& state, const Tensor& dst) {
  const char* op = "amp_scale";
  expect_state(op, state);
  expect(op, "src", src, src.shape(), DType::f32);
  const DType dt = detail::data_dtype(op, "dst", dst);
  TD_CHECK_ARG(dst.numel() == src.numel() && dst.is_contiguous(), op,
               "dst must be contiguous with the {} elements of src, found {}", src.numel(), shape_str(dst.shape()));
  TD_CHECK_ARG(src.device() == state.device() && dst.device() == state.device(), op,
               "src, state and dst must share one device, found {}, {} and {}", src.device().str(),
               state.device().str(), dst.device().str());
  detail::dispatch(Op::amp_scale, dt, state.device()).amp_scale(src, state, dst);
}

void amp_unscale_check_(const std::vector<Tensor>& grads, const Tensor& state) {
  const char* op = "amp_unscale_check_";
  expect_state(op, state);
  expect_grads(op, grads, state.device());
  detail::dispatch(Op::amp_unscale_check_, DType::f32, state.device()).amp_unscale_check_(grads, state);
}

void amp_update_scale_(const Tensor& state, const AmpScaleParams& p) {
  const char* op = "amp_update_scale_";
  expect_state(op, state);
  TD_CHECK_ARG(p.growth_factor > 1.0f && std::isfinite(p.growth_factor), op,
               "growth_factor must be a finite value > 1, found {}", p.growth_factor);
  TD_CHECK_ARG(p.backoff_factor > 0.0f && p.backoff_factor < 1.0f, op, "backoff_factor must lie in (0, 1), found {}",
               p.backoff_factor);
  TD_CHECK_ARG(p.growth_interval >= 1, op, "growth_interval must be >= 1, found {}", p.growth_interval);
  TD_CHECK_ARG(p.min_scale > 0.0f && std::isfinite(p.min_scale), op, "min_scale must be a finite value > 0, found {}",
               p.min_scale);
  detail::dispatch(Op::amp_update_scale_, DType::f32, state.device()).amp_update_scale_(state, p);
}

void clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm, const Tensor& total_norm) {
  const char* op = "clip_grad_norm_";
  TD_CHECK_ARG(max_norm > 0 && std::isfinite(max_norm), op, "max_norm must be a finite value > 0, found {}",
               max_norm);
  expect(op, "total_norm", total_norm, {1}, DType::f32);
  expect_grads(op, grads, total_norm.device());
  detail::dispatch(Op::clip_grad_norm_, DType::f32, total_norm.device()).clip_grad_norm_(grads, max_norm, total_norm);
}

void run_if_finite(const Tensor& state, const std::vector<Tensor>& touched, std::function<void()> fn) {
  const char* op = "run_if_finite";
  TD_CHECK_ARG(fn != nullptr, op, "fn is empty");
  Device dev{};
  if (state.defined()) {
    expect_state(op, state);
    dev = state.device();
  } else {
    for (const Tensor& t : touched)
      if (t.defined()) {
        dev = t.device();
        break;
      }
  }
  for (size_t i = 0; i < touched.size(); ++i)
    TD_CHECK_ARG(!touched[i].defined() || touched[i].device() == dev || touched[i].device().is_host(), op,
                 "touched[{}] is on {}, expected {} or the host", i, touched[i].device().str(), dev.str());
  detail::dispatch(Op::run_if_finite, DType::f32, dev).run_if_finite(state, touched, std::move(fn));
}

}  // namespace tandem::ops
