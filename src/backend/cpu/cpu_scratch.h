// Internal: per-thread scratch buffers for the cpu kernels that need working memory per call
// (attention's head tiles, the fused classifier's logits block). Each thread owns a few
// numbered slots that grow to the largest size asked for and are never shrunk, so a training
// step after the first allocates nothing and touches no fresh pages.
// Thread-safety: a slot belongs to the calling thread (OpenMP workers included); a pointer is
// valid until the same thread asks for the same slot again.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::ops::cpu {

/// Number of slots per thread.
constexpr int kScratchSlots = 8;

/// At least `bytes` bytes of 64-byte-aligned memory in slot `slot` (0 <= slot < kScratchSlots)
/// of the calling thread; contents are unspecified. nullptr when the allocation fails (never
/// throws: it is called inside OpenMP regions).
void* thread_scratch(int slot, size_t bytes) noexcept;

/// thread_scratch for n floats.
inline float* scratch_f32(int slot, int64_t n) {
  return static_cast<float*>(thread_scratch(slot, static_cast<size_t>(n > 0 ? n : 1) * sizeof(float)));
}

}  // namespace tandem::ops::cpu
