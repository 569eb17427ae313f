// Test helpers for the dataset formats: the Error a call throws, writing a file into new
// folders, and files that begin with a JPEG or PNG signature (enough for the formats, which sniff but do not decode).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "data/temp_dir.h"
#include "tandem/error.h"

namespace tandem::testing {

/// The message of the Error `f` throws, checking its code; a test failure when none is thrown.
inline std::string error_of(const std::function<void()>& f, ErrorCode code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an Error";
  return "";
}

/// write_file() after creating the parent folders.
inline void put(const std::string& path, const Bytes& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  write_file(path, bytes);
}

/// Bytes that sniff as JPEG (FF D8 FF E0 ...) or PNG (the 8-byte signature), then a pattern.
inline Bytes fake_jpeg(uint32_t salt, size_t n = 100) {
  Bytes b{0xFF, 0xD8, 0xFF, 0xE0};
  const Bytes p = pattern(n, salt);
  b.insert(b.end(), p.begin(), p.end());
  return b;
}
inline Bytes fake_png(uint32_t salt, size_t n = 100) {
  Bytes b{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  const Bytes p = pattern(n, salt);
  b.insert(b.end(), p.begin(), p.end());
  return b;
}

}  // namespace tandem::testing
