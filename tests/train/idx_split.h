// Fashion-MNIST-shaped IDX files for end-to-end tests: a small learnable split whose class c
// images have a bright horizontal bar at row 2c + 4 over noise in [0, 40).
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tandem/rng.h"

namespace tandem::testing {

inline std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> b = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  }
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

inline void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(p.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
}

// A small learnable dataset: class c images have a bright horizontal bar at row 2c+4.
inline void write_split(const std::filesystem::path& dir, const std::string& split, uint32_t n, bool gzip, uint64_t seed) {
  std::vector<uint8_t> images(static_cast<size_t>(n) * 784), labels(n);
  tandem::Philox rng(seed, n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t c = rng.randint(10);
    labels[i] = static_cast<uint8_t>(c);
    for (int p = 0; p < 784; ++p) images[static_cast<size_t>(i) * 784 + p] = static_cast<uint8_t>(rng.randint(40));
    for (int x = 0; x < 28; ++x) images[static_cast<size_t>(i) * 784 + (2 * c + 4) * 28 + x] = 255;
  }
  const std::string ext = gzip ? ".gz" : "";
  write_file(dir / (split + "-images-idx3-ubyte" + ext), idx_bytes({n, 28, 28}, images), gzip);
  write_file(dir / (split + "-labels-idx1-ubyte" + ext), idx_bytes({n}, labels), gzip);
}

}  // namespace tandem::testing
