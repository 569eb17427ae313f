// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As
// Easy as 1, 2, 3", SC 2011). A generator is a pure function of its key and counter, so
// randomness in tandem is keyed by (seed, epoch, rank, sample index) and never by a thread:
// results do not depend on the number of workers, and a resumed run sees the same numbers.
// Thread-safety: a Philox object is not shared between threads; make one per use.
#pragma once

#include <array>
#include <cstdint>

namespace tandem {

class Philox {
 public:
  /// Stream of numbers for (seed, a, b, c), e.g. Philox(seed, epoch, sample_index, purpose).
  Philox(uint64_t seed, uint64_t a, uint32_t b = 0, uint32_t c = 0);

  /// Next 32 random bits.
  uint32_t next_u32();
  /// Uniform float in [0, 1), 24 random bits.
  float uniform();
  /// Uniform integer in [0, n), n > 0 (Lemire's nearly-divisionless method).
  uint32_t randint(uint32_t n);
  /// Uniform 64-bit integer in [0, n), n > 0.
  uint64_t randint64(uint64_t n);
  /// Skips the next `n` 32-bit draws in O(1): the stream then continues as if next_u32()
  /// had been called n more times (a part of a tensor initialised from its element offset).
  /// The block counter is 32 bits: streams longer than 2^34 draws wrap around.
  void skip(uint64_t n);

  /// One block: 4 x 32 bits for `counter` under `key` (the raw Philox4x32-10 function).
  static std::array<uint32_t, 4> block(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

 private:
  std::array<uint32_t, 4> counter_;
  std::array<uint32_t, 2> key_;
  std::array<uint32_t, 4> buf_{};
  int used_ = 4;
};

/// splitmix64 finaliser: mixes a 64-bit value (Steele et al., "Fast splittable PRNGs", 2014).
uint64_t mix64(uint64_t x);

}  // namespace tandem
