// Fully connected layer on oneDNN's sgemm (row-major, OpenMP threads); beta = 1 accumulates
// the weight gradient in place. bf16 data (x, w, y, dy, dx) runs on oneDNN's matmul
// (cpu_matmul.h) with f32 accumulation; b, dw and db stay f32. The same for the [in, out]
// weight layout (linear_in_out_*).
#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/cpu_matmul.h"

namespace tandem::ops {
namespace {

void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl::status s = dnnl::sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  TD_CHECK(s == dnnl::status::success, ErrorCode::internal, "linear", "oneDNN sgemm failed with status {}",
           static_cast<int>(s));
}

// y = x w^T + b for 16-bit x, w, y (b f32).
void forward_lp(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  const int64_t n = x.size(0), in = x.size(1), out = w.size(0);
  if (n == 0 || out == 0) return;
  const DType dt = x.dtype();
  if (in == 0) {  // y = b (or 0)
    uint16_t* yp = y.data<uint16_t>();
    const float* bp = b.defined() ? b.data<float>() : nullptr;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < out; ++j) yp[i * out + j] = bp ? float_to_bf16(bp[j]) : 0;
    return;
  }
  cpu::matmul(dt, n, out, in, {x.raw_data(), false}, {w.raw_data(), true},
              b.defined() ? b.data<float>() : nullptr, y.raw_data(), dt, false);
}

void backward_data_lp(const Tensor& dy, const Tensor& w, const Tensor& dx) {
  const int64_t n = dy.size(0), out = dy.size(1), in = w.size(1);
  if (n == 0 || in == 0) return;
  if (out == 0) {
    std::memset(dx.raw_data(), 0, dx.nbytes());
    return;
  }
  cpu::matmul(dy.dtype(), n, in, out, {dy.raw_data(), false}, {w.raw_data(), false}, nullptr, dx.raw_data(),
              dy.dtype(), false);
}

// The weight gradient's empty cases, for every dtype (dw and db are f32): no outputs leaves
// nothing to do; no samples gives zero gradients (or leaves them, when accumulating). True
// when the case was empty and is handled.
bool weights_grad_is_empty(int64_t n, int64_t out, const Tensor& dw, const Tensor& db, bool accumulate) {
  if (out == 0) return true;
  if (n > 0) return false;
  if (!accumulate) {
    cpu::zero(dw.data<float>(), dw.numel());
    if (db.defined()) cpu::zero(db.data<float>(), db.numel());
  }
  return true;
}

// db [out] (+)= the column sums of dy [n, out] (f32, or bf16 read as stored), in f32.
void bias_grad(const Tensor& dy, const Tensor& db, bool accumulate) {
  const int64_t n = dy.size(0), out = dy.size(1);
  float* dbp = db.data<float>();
  if (!accumulate)
    for (int64_t j = 0; j < out; ++j) dbp[j] = 0.0f;
  if (dy.dtype() == DType::f32) {
    const float* dyp = dy.data<float>();
    for (int64_t i = 0; i < n; ++i) {
#pragma omp simd
      for (int64_t j = 0; j < out; ++j) dbp[j] += dyp[i * out + j];
    }
    return;
  }
  const uint16_t* dyp = dy.data<uint16_t>();
  for (int64_t i = 0; i < n; ++i) {
#pragma omp simd
    for (int64_t j = 0; j < out; ++j) dbp[j] += cpu::ld(dyp[i * out + j]);
  }
}

void backward_weights_lp(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db, bool accumulate) {
  const int64_t n = x.size(0), in = x.size(1), out = dy.size(1);
  if (weights_grad_is_empty(n, out, dw, db, accumulate)) return;
  // dw[out, in] (+)= dy^T [out, n] * x[n, in], written in f32
  if (in > 0)
    cpu::matmul(x.dtype(), out, in, n, {dy.raw_data(), true}, {x.raw_data(), false}, nullptr, dw.raw_data(),
                DType::f32, accumulate);
  if (db.defined()) bias_grad(dy, db, accumulate);
}

}  // namespace

void CpuBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  if (x.dtype() != DType::f32) return forward_lp(x, w, b, y);
  const int64_t n = x.size(0), in = x.size(1), out = w.size(0);
  float* yp = y.data<float>();
  float beta = 0.0f;
  if (b.defined()) {
    const float* bp = b.data<float>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < out; ++j) yp[i * out + j] = bp[j];
    beta = 1.0f;
  }
  if (n == 0 || out == 0) return;
  if (in == 0) {
    if (!b.defined()) cpu::zero(yp, n * out);
    return;
  }
  // y[n, out] = x[n, in] * w[out, in]^T
  gemm('N', 'T', n, out, in, x.data<float>(), in, w.data<float>(), in, beta, yp, out);
}

void CpuBackend::linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) {
  if (dy.dtype() != DType::f32) return backward_data_lp(dy, w, dx);
  const int64_t n = dy.size(0), out = dy.size(1), in = w.size(1);
  if (n == 0 || in == 0) return;
  if (out == 0) {
    cpu::zero(dx.data<float>(), dx.numel());
    return;
  }
  // dx[n, in] = dy[n, out] * w[out, in]
  gemm('N', 'N', n, in, out, dy.data<float>(), out, w.data<float>(), in, 0.0f, dx.data<float>(), in);
}

void CpuBackend::linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                                         bool accumulate) {
  if (x.dtype() != DType::f32) return backward_weights_lp(x, dy, dw, db, accumulate);
  const int64_t n = x.size(0), in = x.size(1), out = dy.size(1);
  if (weights_grad_is_empty(n, out, dw, db, accumulate)) return;
  // dw[out, in] (+)= dy[n, out]^T * x[n, in]
  if (in > 0)
    gemm('T', 'N', out, in, n, dy.data<float>(), out, x.data<float>(), in, accumulate ? 1.0f : 0.0f,
         dw.data<float>(), in);
  if (db.defined()) bias_grad(dy, db, accumulate);
}

// The same layer with the weight stored [in, out] (tandem/transformer_ops.h): the products
// with the other transposes; the empty cases and db as above.
void CpuBackend::linear_in_out_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  const int64_t n = x.size(0), in = x.size(1), out = w.size(1);
  const DType dt = x.dtype();
  if (n == 0 || out == 0) return;
  if (dt != DType::f32) {
    if (in == 0) return forward_lp(x, Tensor::empty({out, 0}, dt), b, y);  // y = b (or 0)
    cpu::matmul(dt, n, out, in, {x.raw_data(), false}, {w.raw_data(), false}, b.defined() ? b.data<float>() : nullptr,
                y.raw_data(), dt, false);
    return;
  }
  float* yp = y.data<float>();
  float beta = 0.0f;
  if (b.defined()) {
    const float* bp = b.data<float>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < out; ++j) yp[i * out + j] = bp[j];
    beta = 1.0f;
  }
  if (in == 0) {
    if (!b.defined()) cpu::zero(yp, n * out);
    return;
  }
  // y[n, out] = x[n, in] * w[in, out]
  gemm('N', 'N', n, out, in, x.data<float>(), in, w.data<float>(), out, beta, yp, out);
}

void CpuBackend::linear_in_out_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) {
  const int64_t n = dy.size(0), out = dy.size(1), in = w.size(0);
  if (n == 0 || in == 0) return;
  if (out == 0) {
    std::memset(dx.raw_data(), 0, dx.nbytes());
    return;
  }
  // dx[n, in] = dy[n, out] * w[in, out]^T
  if (dy.dtype() == DType::f32)
    gemm('N', 'T', n, in, out, dy.data<float>(), out, w.data<float>(), out, 0.0f, dx.data<float>(), in);
  else
    cpu::matmul(dy.dtype(), n, in, out, {dy.raw_data(), false}, {w.raw_data(), true}, nullptr, dx.raw_data(),
                dy.dtype(), false);
}

void CpuBackend::linear_in_out_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                                                bool accumulate) {
  const int64_t n = x.size(0), in = x.size(1), out = dy.size(1);
  if (weights_grad_is_empty(n, out, dw, db, accumulate)) return;
  // dw[in, out] (+)= x[n, in]^T * dy[n, out], in f32
  if (in > 0) {
    if (x.dtype() == DType::f32)
      gemm('T', 'N', in, out, n, x.data<float>(), in, dy.data<float>(), out, accumulate ? 1.0f : 0.0f,
           dw.data<float>(), out);
    else
      cpu::matmul(x.dtype(), in, out, n, {x.raw_data(), true}, {dy.raw_data(), false}, nullptr, dw.raw_data(),
                  DType::f32, accumulate);
  }
  if (db.defined()) bias_grad(dy, db, accumulate);
}

}  // namespace tandem::ops
