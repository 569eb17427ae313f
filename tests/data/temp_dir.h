// Test helpers: a temporary directory removed at scope exit, and writers for raw, gzip and
// IDX files used by the data tests.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace tandem::testing {

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("tandem-data-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  /// A given folder (created), removed at scope exit only by its `owner` (e.g. one rank of
  /// several processes sharing it).
  TempDir(std::filesystem::path path, bool owner) : path_(std::move(path)), owner_(owner) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    if (owner_) std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
  bool owner_ = true;
};

using Bytes = std::vector<uint8_t>;

/// IDX bytes: 0, 0, dtype, rank, big-endian u32 dims, then the payload.
inline Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& payload, uint8_t dtype = 0x08) {
  Bytes b{0, 0, dtype, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

/// Bytes 0..n-1 of a fixed pseudo-random pattern.
inline Bytes pattern(size_t n, uint32_t salt = 1) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * 2654435761u + salt * 40503u) >> 13);
  return b;
}

inline void write_file(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// One gzip member (RFC 1952) holding `bytes`.
inline Bytes gzip(const Bytes& bytes) {
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  Bytes out(deflateBound(&zs, bytes.size()) + 64);
  zs.next_in = const_cast<Bytes::value_type*>(bytes.data());
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace tandem::testing
