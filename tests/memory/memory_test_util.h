// Helpers for the memory tests: token batches, host copies of device tensors, bitwise
// comparison, and one training step of a GPT or an image model driven by hand.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/module.h"
#include "tandem/ops.h"
#include "tandem/optim/optimizer.h"
#include "tandem/rng.h"
#include "tandem/stream.h"
#include "tandem/tensor.h"

namespace tandem::memory_test {

/// Token ids [B, T] i64 in [0, vocab) from Philox(seed).
inline Tensor tokens_of(const Shape& s, int64_t vocab, uint64_t seed) {
  Tensor t = Tensor::empty(s, DType::i64);
  Philox rng(seed, 9);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<int64_t>()[i] = rng.randint(static_cast<uint32_t>(vocab));
  return t;
}

/// Uniform values in [-1, 1) [N, C, H, W] from Philox(seed).
inline Tensor images_of(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s);
  Philox rng(seed, 3);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 2.0f * rng.uniform() - 1.0f;
  return t;
}

/// A host copy of `t` (the host waits for the copy); host tensors are cloned.
inline Tensor host_copy(const Tensor& t) {
  if (t.device().is_host()) return t.clone();
  const Stream s = runtime_for(t.device()).current_stream(t.device().index);
  Tensor h = t.to(Device{}, s);
  s.synchronize();
  return h;
}

/// Whether the two tensors hold the same bytes.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor ha = host_copy(a), hb = host_copy(b);
  return ha.shape() == hb.shape() && ha.dtype() == hb.dtype() &&
         std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()) == 0;
}

/// Waits for everything queued on `device`'s current stream (no-op on the host).
inline void sync(Device device) {
  if (!device.is_host()) runtime_for(device).current_stream(device.index).synchronize();
}

}  // namespace tandem::memory_test
