// Test helpers for the image codec: the fixtures of tests/data/fixtures/images/ (made by
// scripts/make_image_fixtures.py) and the reference pixels Pillow decoded them to.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "data/sanitizer_build.h"
#include "tandem/error.h"

namespace tandem::testing {

inline std::string image_fixture_path(const std::string& name) {
  return std::string(TANDEM_SOURCE_DIR) + "/tests/data/fixtures/images/" + name;
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline std::vector<uint8_t> image_fixture(const std::string& name) {
  return read_bytes(image_fixture_path(name));
}

/// RGB u8 [height, width, 3].
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;
};

/// reference.bin: "tandem-image-reference 1 <count>\n", then per image "<name> <w> <h>\n" and
/// w * h * 3 bytes.
inline std::map<std::string, RgbImage> image_references() {
  const std::vector<uint8_t> bytes = image_fixture("reference.bin");
  std::map<std::string, RgbImage> out;
  size_t pos = 0;
  auto line = [&] {
    std::string s;
    while (pos < bytes.size() && bytes[pos] != '\n') s += static_cast<char>(bytes[pos++]);
    ++pos;
    return s;
  };
  std::istringstream head(line());
  std::string magic;
  int version = 0, count = 0;
  head >> magic >> version >> count;
  EXPECT_EQ(magic, "tandem-image-reference");
  EXPECT_EQ(version, 1);
  for (int i = 0; i < count; ++i) {
    std::istringstream entry(line());
    std::string name;
    RgbImage img;
    entry >> name >> img.width >> img.height;
    const size_t n = static_cast<size_t>(img.width) * img.height * 3;
    EXPECT_LE(pos + n, bytes.size()) << "reference.bin ends inside " << name;
    if (pos + n > bytes.size()) break;
    img.pixels.assign(bytes.begin() + pos, bytes.begin() + pos + n);
    pos += n;
    out[name] = std::move(img);
  }
  return out;
}

/// The largest absolute difference between two equally long byte arrays (256 when the sizes
/// differ).
inline int max_abs_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 256;
  int m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(int{a[i]} - int{b[i]}));
  return m;
}

inline double mean_abs_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size() || a.empty()) return 256;
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::abs(int{a[i]} - int{b[i]});
  return s / static_cast<double>(a.size());
}

/// The error is Error(format), its message starts with "<source>: " and contains `needle`.
inline void expect_format_error(const Error& e, const std::string& source,
                                const std::string& needle) {
  EXPECT_EQ(e.code(), ErrorCode::format) << e.what();
  const std::string msg = e.what();
  EXPECT_EQ(msg.rfind(source + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "' in: " << msg;
}

/// Resident set size in bytes, from /proc/self/statm (second field, in pages); -1 if unknown.
inline int64_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long size = 0, resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE) : -1;
}

/// The growth of the resident set over run(n), after run(warm_up) has filled allocator pools
/// and per-thread handles.
template <typename F>
int64_t resident_growth(F&& run, int warm_up, int n) {
  run(warm_up);
  const int64_t before = resident_bytes();
  EXPECT_GT(before, 0);
  run(n);
  return resident_bytes() - before;
}

}  // namespace tandem::testing
