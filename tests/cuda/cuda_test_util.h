// Helpers for the cuda tests: the skip when no GPU is present, random host tensors, and
// device tensors with sentinel bytes on both sides (to catch out-of-bounds writes).
#pragma once

#include <gtest/gtest.h>

#include <cstring>

#include "tandem/cuda.h"
#include "tandem/rng.h"
#include "tandem/stream.h"
#include "tandem/tensor.h"

/// Skips the test (reported as skipped) unless a CUDA device is present.
#define TD_REQUIRE_CUDA()                                                              \
  do {                                                                                 \
    if (!::tandem::cuda::built()) GTEST_SKIP() << "no CUDA device (built without CUDA)"; \
    if (::tandem::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";         \
  } while (0)

namespace tandem::testing {

inline Device cuda0() { return Device(DeviceKind::cuda, 0); }
inline Stream cuda_stream() { return runtime(DeviceKind::cuda).default_stream(0); }

/// f32 host tensor with uniform values in [lo, hi), keyed by seed.
inline Tensor random_tensor(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t = Tensor::empty(shape);
  Philox rng(seed, 7);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = lo + (hi - lo) * rng.uniform();
  return t;
}

/// A cuda:0 tensor inside a larger buffer whose `kPad` elements before and after hold the byte
/// 0xA5; check() verifies they are untouched and returns the tensor's contents on the host.
class Guarded {
 public:
  static constexpr int64_t kPad = 64;
  static constexpr unsigned char kByte = 0xA5;

  /// A copy of `host` (any dtype, contiguous).
  explicit Guarded(const Tensor& host) : shape_(host.shape()), dtype_(host.dtype()) {
    Tensor staging = Tensor::empty({host.numel() + 2 * kPad}, dtype_);
    std::memset(staging.raw_data(), kByte, staging.nbytes());
    std::memcpy(static_cast<char*>(staging.raw_data()) + kPad * staging.element_size(), host.raw_data(),
                host.nbytes());
    Stream s = cuda_stream();
    full_ = staging.to(cuda0(), s);
    s.synchronize();
    t = full_.narrow(0, kPad, host.numel()).view(shape_);
  }
  /// Uninitialised contents (sentinel bytes) of `shape`.
  Guarded(const Shape& shape, DType dtype) : Guarded(filled(shape, dtype)) {}

  Tensor t;  // the tensor ops read or write

  /// The contents on the host; fails the test when a sentinel byte changed.
  Tensor check() const {
    Stream s = cuda_stream();
    Tensor back = full_.to(Device{}, s);
    s.synchronize();
    const auto* b = static_cast<const unsigned char*>(back.raw_data());
    const size_t pad = static_cast<size_t>(kPad) * back.element_size();
    size_t bad = 0;
    for (size_t i = 0; i < pad; ++i) bad += (b[i] != kByte) + (b[back.nbytes() - 1 - i] != kByte);
    EXPECT_EQ(bad, 0u) << "bytes written outside the tensor";
    return back.narrow(0, kPad, shape_numel(shape_)).view(shape_).clone();
  }

 private:
  static Tensor filled(const Shape& shape, DType dtype) {
    Tensor t = Tensor::empty(shape, dtype);
    std::memset(t.raw_data(), kByte, t.nbytes());
    return t;
  }
  Shape shape_;
  DType dtype_;
  Tensor full_;
};

/// Element-wise |a - b| <= atol + rtol * |b| for f32 host tensors of one shape.
inline void expect_close(const Tensor& a, const Tensor& b, double rtol, double atol, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::abs(static_cast<double>(x[i]) - y[i]);
    if (!(d <= atol + rtol * std::abs(static_cast<double>(y[i])))) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << a.numel() << " elements differ; first at " << first
                    << ": cuda " << (first >= 0 ? x[first] : 0.0f) << " vs cpu " << (first >= 0 ? y[first] : 0.0f);
}

}  // namespace tandem::testing
