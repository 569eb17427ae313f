// Token shards (tandem/data/token_shard.h): writing, mapping and checking.
#include "tandem/data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "tandem/atomic_file.h"
#include "tandem/error.h"

namespace tandem::data {
namespace {

constexpr const char* kOp = "token_shard";
constexpr char kMagic[8] = {'T', 'N', 'D', 'M', 'T', 'O', 'K', 'S'};

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

uint32_t crc32_of(const void* p, size_t n) {
  uLong c = ::crc32(0L, Z_NULL, 0);
  const auto* b = static_cast<const Bytef*>(p);
  while (n > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    c = ::crc32(c, b, chunk);
    b += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(c);
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw_error(ErrorCode::format, kOp, path + ": " + what);
}

}  // namespace

void write_token_shard(const std::string& path, const std::vector<uint32_t>& ids, uint32_t vocab_size) {
  TD_CHECK_ARG(vocab_size > 0 && vocab_size < UINT32_MAX, kOp, "{}: vocab_size must be in [1, 2^32 - 1), got {}", path,
               vocab_size);
  const int width = vocab_size <= 65536 ? 2 : 4;
  std::vector<uint8_t> payload(ids.size() * static_cast<size_t>(width));
  for (size_t i = 0; i < ids.size(); ++i) {
    TD_CHECK_ARG(ids[i] < vocab_size, kOp, "{}: token {} at position {} is not below the vocab size {}", path, ids[i],
                 i, vocab_size);
    if (width == 2) {
      payload[2 * i] = static_cast<uint8_t>(ids[i]);
      payload[2 * i + 1] = static_cast<uint8_t>(ids[i] >> 8);
    } else {
      put_u32(payload.data() + 4 * i, ids[i]);
    }
  }
  uint8_t h[kTokenShardHeaderBytes] = {};
  std::memcpy(h, kMagic, 8);
  put_u32(h + 8, kTokenShardVersion);
  put_u32(h + 12, static_cast<uint32_t>(kTokenShardHeaderBytes));
  put_u32(h + 16, vocab_size);
  put_u32(h + 20, static_cast<uint32_t>(width));
  put_u64(h + 24, ids.size());
  put_u32(h + 32, crc32_of(payload.data(), payload.size()));
  put_u32(h + 60, crc32_of(h, 60));
  AtomicFile f(path, kOp);
  f.write(h, sizeof h);
  f.write(payload.data(), payload.size());
  f.commit();
}

TokenShard::TokenShard(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_error(ErrorCode::io, kOp, fmt::format("{}: {}", path, std::strerror(errno)));
  struct stat st {};
  const int rc = ::fstat(fd, &st);
  const int err = errno;
  if (rc != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_error(ErrorCode::io, kOp, fmt::format("{}: {}", path, rc != 0 ? std::strerror(err) : "expected a regular file"));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < kTokenShardHeaderBytes) {
    ::close(fd);
    bad(path, fmt::format("truncated: {} bytes, expected at least the {}-byte header of a token shard", size,
                          kTokenShardHeaderBytes));
  }
  map_ = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int merr = errno;
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw_error(ErrorCode::io, kOp, fmt::format("{}: mmap failed: {}", path, std::strerror(merr)));
  }
  map_bytes_ = size;
  try {
    const auto* b = static_cast<const uint8_t*>(map_);
    if (std::memcmp(b, kMagic, 8) != 0) bad(path, "bad magic: expected \"TNDMTOKS\" (a tandem token shard)");
    const uint32_t version = get_u32(b + 8);
    if (version != kTokenShardVersion)
      bad(path, fmt::format("unsupported token shard version {}: this build reads version {}", version,
                            kTokenShardVersion));
    if (get_u32(b + 60) != crc32_of(b, 60)) bad(path, "header CRC32 mismatch: the header is corrupt");
    if (get_u32(b + 12) != kTokenShardHeaderBytes)
      bad(path, fmt::format("expected a {}-byte header, found {}", kTokenShardHeaderBytes, get_u32(b + 12)));
    vocab_size_ = get_u32(b + 16);
    const uint32_t width = get_u32(b + 20);
    if (width != 2 && width != 4) bad(path, fmt::format("expected 2- or 4-byte token ids, found {}", width));
    if (vocab_size_ == 0 || (width == 2 && vocab_size_ > 65536))
      bad(path, fmt::format("vocab size {} does not fit {}-byte ids", vocab_size_, width));
    token_bytes_ = static_cast<int>(width);
    const uint64_t count = get_u64(b + 24);
    const uint64_t payload = size - kTokenShardHeaderBytes;
    if (count > payload / width)
      bad(path, fmt::format("truncated: the header says {} tokens of {} bytes, the file holds {} bytes after the header",
                            count, width, payload));
    if (count * width != payload)
      bad(path, fmt::format("{} trailing bytes after the {} tokens the header says", payload - count * width, count));
    ids_ = b + kTokenShardHeaderBytes;
    count_ = static_cast<int64_t>(count);
    if (get_u32(b + 32) != crc32_of(ids_, payload)) bad(path, "payload CRC32 mismatch: the token ids are corrupt");
    for (int64_t i = 0; i < count_; ++i)
      if (token(i) >= vocab_size_)
        bad(path, fmt::format("token {} at position {} is not below the vocab size {}", token(i), i, vocab_size_));
  } catch (...) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw;
  }
}

TokenShard::~TokenShard() {
  if (map_) ::munmap(map_, map_bytes_);
}

void TokenShard::tokens(int64_t begin, int64_t n, int32_t* out) const {
  TD_CHECK_ARG(begin >= 0 && n >= 0 && begin <= count_ - n, kOp, "{}: tokens [{}, {}) are not inside [0, {})", path_,
               begin, begin + n, count_);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(token(begin + i));
}

}  // namespace tandem::data
