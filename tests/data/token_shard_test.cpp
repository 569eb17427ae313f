// Token shards (tandem/data/token_shard.h): round trips in both id widths, and every kind of
// damaged shard named in one line.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset_test_util.h"
#include "data/image_fixtures.h"
#include "data/temp_dir.h"
#include "tandem/data/token_shard.h"
#include "tandem/error.h"

namespace tandem::data {
namespace {

using tandem::testing::error_of;
using tandem::testing::TempDir;

using tandem::testing::read_bytes;
void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

uint32_t crc(const uint8_t* p, size_t n) { return static_cast<uint32_t>(::crc32(::crc32(0, Z_NULL, 0), p, n)); }
void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
// Rewrites the header CRC after an edit of the header, so that the check after it is reached.
void fix_header_crc(std::vector<uint8_t>& b) { put_u32(b.data() + 60, crc(b.data(), 60)); }

TEST(TokenShard, RoundTripsInBothIdWidths) {
  TempDir dir;
  for (uint32_t vocab : {50257u, 65536u, 70000u}) {
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < 1001; ++i) ids.push_back((i * 7919u) % vocab);
    ids.push_back(vocab - 1);
    const std::string path = dir.file("s.tok");
    write_token_shard(path, ids, vocab);
    const TokenShard s(path);
    EXPECT_EQ(s.size(), static_cast<int64_t>(ids.size()));
    EXPECT_EQ(s.vocab_size(), vocab);
    EXPECT_EQ(s.token_bytes(), vocab <= 65536 ? 2 : 4);
    EXPECT_EQ(std::filesystem::file_size(path), kTokenShardHeaderBytes + ids.size() * s.token_bytes());
    for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(s.token(static_cast<int64_t>(i)), ids[i]) << i;
    std::vector<int32_t> window(5);
    s.tokens(997, 5, window.data());
    for (int k = 0; k < 5; ++k) EXPECT_EQ(window[k], static_cast<int32_t>(ids[997 + k]));
    error_of([&] { s.tokens(999, 5, window.data()); }, ErrorCode::invalid_argument);
  }
  error_of([&] { write_token_shard(dir.file("x.tok"), {1, 2, 9}, 9); }, ErrorCode::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.tok")));  // nothing half-written
}

TEST(TokenShard, EveryDamageIsNamedInOneLine) {
  TempDir dir;
  const std::string path = dir.file("v.tok");
  write_token_shard(path, {3, 1, 4, 1, 5, 9, 2, 6}, 10);
  const std::vector<uint8_t> good = read_bytes(path);
  struct Case {
    const char* what;
    std::function<void(std::vector<uint8_t>&)> edit;
  };
  const std::vector<Case> cases = {
      {"bad magic: expected \"TNDMTOKS\"", [](auto& b) { b[0] = 'X'; }},
      {"unsupported token shard version 2: this build reads version 1",
       [](auto& b) { put_u32(b.data() + 8, 2), fix_header_crc(b); }},
      {"header CRC32 mismatch", [](auto& b) { b[16] ^= 1; }},
      {"truncated: the header says 8 tokens of 2 bytes, the file holds 14 bytes", [](auto& b) { b.resize(b.size() - 2); }},
      {"truncated: 10 bytes, expected at least the 64-byte header", [](auto& b) { b.resize(10); }},
      {"3 trailing bytes after the 8 tokens", [](auto& b) { b.insert(b.end(), {0, 0, 0}); }},
      {"payload CRC32 mismatch: the token ids are corrupt", [](auto& b) { b[64] ^= 1; }},
      {"token 9 at position 5 is not below the vocab size 8",
       [](auto& b) { put_u32(b.data() + 16, 8), fix_header_crc(b); }},
      {"expected 2- or 4-byte token ids, found 3", [](auto& b) { put_u32(b.data() + 20, 3), fix_header_crc(b); }},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> b = good;
    c.edit(b);
    write_bytes(path, b);
    const std::string msg = error_of([&] { TokenShard s(path); }, ErrorCode::format);
    EXPECT_EQ(msg.rfind("[token_shard] " + path + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  error_of([&] { TokenShard s(dir.file("missing.tok")); }, ErrorCode::io);
  error_of([&] { TokenShard s(dir.str()); }, ErrorCode::io);
}

}  // namespace
}  // namespace tandem::data
