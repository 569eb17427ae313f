// Token shards: a flat array of token ids, as a language model's training data, with a header
// that says what the ids are and a checksum that says they arrived whole.
//
// Layout (little-endian), version 1:
//   bytes  0-7   magic "TNDMTOKS"
//          8-11  version (u32, 1)
//         12-15  header bytes (u32, 64)
//         16-19  vocab_size (u32): every id is < vocab_size
//         20-23  token bytes (u32): 2 (ids stored as u16) or 4 (u32)
//         24-31  count (u64): tokens in the payload
//         32-35  payload CRC32 (zlib's, over the count * token bytes after the header)
//         36-59  reserved, zero
//         60-63  header CRC32 (over bytes 0-59)
//   64-...       the ids
// The file's size is exactly 64 + count * token bytes. u16 is chosen by write_token_shard when
// vocab_size <= 65536 (GPT-2's 50,257 fits), halving the bytes as nanoGPT's .bin files do.
// Thread-safety: a TokenShard is immutable after construction; token() and tokens() may be
// called from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tandem::data {

inline constexpr uint32_t kTokenShardVersion = 1;
inline constexpr size_t kTokenShardHeaderBytes = 64;

/// Writes `ids` (each < vocab_size) to `path` as a token shard, atomically (a temporary file
/// renamed over `path`: a reader never sees half a shard). Throws Error(invalid_argument,
/// "[token_shard] ...") for vocab_size 0 or above 2^32 - 1 or an id >= vocab_size (naming its
/// position), Error(io) when the file cannot be written.
void write_token_shard(const std::string& path, const std::vector<uint32_t>& ids, uint32_t vocab_size);

/// A token shard mapped read-only. The constructor checks everything before returning: the
/// file exists and is a regular file (Error(io) naming it), the magic, version, header size,
/// token width, the file size against the count (truncated or padded), both CRC32s, and that
/// every id is < vocab_size (the first one that is not is named with its position); each
/// failure is Error(format, "[token_shard] <path>: <what was expected>").
class TokenShard {
 public:
  explicit TokenShard(const std::string& path);
  ~TokenShard();
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  const std::string& path() const { return path_; }
  /// Tokens in the shard.
  int64_t size() const { return count_; }
  uint32_t vocab_size() const { return vocab_size_; }
  /// 2 (u16 ids) or 4 (u32 ids).
  int token_bytes() const { return token_bytes_; }
  /// Id at position i in [0, size()); unchecked.
  uint32_t token(int64_t i) const {
    return token_bytes_ == 2 ? static_cast<const uint16_t*>(ids_)[i] : static_cast<const uint32_t*>(ids_)[i];
  }
  /// Ids [begin, begin + n) widened to i32 into `out` (n values); Error(invalid_argument) when the
  /// range is not inside the shard.
  void tokens(int64_t begin, int64_t n, int32_t* out) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const void* ids_ = nullptr;
  int64_t count_ = 0;
  uint32_t vocab_size_ = 0;
  int token_bytes_ = 0;
};

}  // namespace tandem::data
