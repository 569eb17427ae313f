#include "tandem/rng.h"

#include <cstddef>

namespace tandem {

static inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

std::array<uint32_t, 4> Philox::block(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, c[0], hi0, lo0);
    mulhilo(kM1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

Philox::Philox(uint64_t seed, uint64_t a, uint32_t b, uint32_t c) {
  key_ = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  // counter word 0 advances per block; words 1..3 carry the caller's coordinates.
  const uint64_t ab = mix64(a) ^ (static_cast<uint64_t>(b) << 32 | c);
  counter_ = {0u, static_cast<uint32_t>(ab), static_cast<uint32_t>(ab >> 32),
              static_cast<uint32_t>(mix64(a ^ (static_cast<uint64_t>(c) << 32 | b)))};
}

uint32_t Philox::next_u32() {
  if (used_ == 4) {
    buf_ = block(counter_, key_);
    ++counter_[0];
    used_ = 0;
  }
  return buf_[static_cast<size_t>(used_++)];
}

void Philox::skip(uint64_t n) {
  const uint64_t left = static_cast<uint64_t>(4 - used_);  // draws still in the buffer
  if (n < left) {
    used_ += static_cast<int>(n);
    return;
  }
  n -= left;
  counter_[0] += static_cast<uint32_t>(n / 4);
  used_ = 4;
  if (n % 4 != 0) {
    buf_ = block(counter_, key_);
    ++counter_[0];
    used_ = static_cast<int>(n % 4);
  }
}

float Philox::uniform() { return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f); }

uint32_t Philox::randint(uint32_t n) {
  uint64_t m = static_cast<uint64_t>(next_u32()) * n;
  uint32_t l = static_cast<uint32_t>(m);
  if (l < n) {
    const uint32_t t = (0u - n) % n;
    while (l < t) {
      m = static_cast<uint64_t>(next_u32()) * n;
      l = static_cast<uint32_t>(m);
    }
  }
  return static_cast<uint32_t>(m >> 32);
}

uint64_t Philox::randint64(uint64_t n) {
  if (n <= 0xffffffffull) return randint(static_cast<uint32_t>(n));
  // rejection sampling on 64 bits
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    const uint64_t v = (static_cast<uint64_t>(next_u32()) << 32) | next_u32();
    if (v < limit) return v % n;
  }
}

}  // namespace tandem
