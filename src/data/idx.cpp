#include "tandem/data/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace tandem::data {
namespace {

constexpr const char* kOp = "idx";

[[noreturn]] void fail(ErrorCode code, const std::string& path, const std::string& what) {
  throw_error(code, kOp, path + ": " + what);
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

/// Reads a file's bytes, raw or gunzipped. read() returns fewer bytes than asked only at the
/// end of the data; for gzip, `truncated()` then says whether the stream ended early.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual size_t read(uint8_t* dst, size_t n) = 0;
  virtual bool truncated() const { return false; }
};

class RawSource final : public ByteSource {
 public:
  RawSource(std::FILE* f, const std::string& path) : f_(f), path_(path) {}
  size_t read(uint8_t* dst, size_t n) override {
    size_t got = 0;
    while (got < n) {
      const size_t r = std::fread(dst + got, 1, n - got, f_);
      if (r == 0) {
        if (std::ferror(f_)) fail(ErrorCode::io, path_, std::string("read failed: ") + std::strerror(errno));
        break;
      }
      got += r;
    }
    return got;
  }

 private:
  std::FILE* f_;
  const std::string& path_;
};

/// Streaming gzip decoder (RFC 1952). Accepts concatenated members, like gzip(1); anything
/// else after the last member is an error.
class GzipSource final : public ByteSource {
 public:
  GzipSource(std::FILE* f, const std::string& path) : f_(f), path_(path), in_(1 << 20) {
    std::memset(&zs_, 0, sizeof(zs_));
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) fail(ErrorCode::out_of_memory, path_, "inflateInit2 failed");
  }
  ~GzipSource() override { inflateEnd(&zs_); }

  size_t read(uint8_t* dst, size_t n) override {
    size_t got = 0;
    while (got < n && !done_) {
      if (zs_.avail_in == 0 && !refill()) {
        truncated_ = true;  // compressed data ended before the end-of-stream marker
        done_ = true;
        break;
      }
      const size_t ask = std::min<size_t>(n - got, 1u << 30);
      zs_.next_out = dst + got;
      zs_.avail_out = static_cast<uInt>(ask);
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      got += ask - zs_.avail_out;
      if (rc == Z_STREAM_END) {
        member_end();
      } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
        fail(ErrorCode::format, path_,
             fmt::format("corrupt gzip stream: {}", zs_.msg ? zs_.msg : "invalid data"));
      } else if (rc == Z_MEM_ERROR) {
        fail(ErrorCode::out_of_memory, path_, "out of memory while inflating");
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        fail(ErrorCode::format, path_, fmt::format("gzip error {}", rc));
      }
    }
    return got;
  }
  bool truncated() const override { return truncated_; }

 private:
  bool refill() {
    if (eof_) return false;
    const size_t r = std::fread(in_.data(), 1, in_.size(), f_);
    if (r == 0) {
      if (std::ferror(f_)) fail(ErrorCode::io, path_, std::string("read failed: ") + std::strerror(errno));
      eof_ = true;
      return false;
    }
    zs_.next_in = in_.data();
    zs_.avail_in = static_cast<uInt>(r);
    return true;
  }

  // After one gzip member: another member may follow; anything else is trailing garbage.
  void member_end() {
    if (zs_.avail_in == 0 && !refill()) {
      done_ = true;
      return;
    }
    if (zs_.avail_in < 2 && (zs_.next_in[0] != 0x1f)) trailing();
    if (zs_.avail_in >= 2 && !(zs_.next_in[0] == 0x1f && zs_.next_in[1] == 0x8b)) trailing();
    inflateReset(&zs_);
  }
  [[noreturn]] void trailing() {
    fail(ErrorCode::format, path_,
         fmt::format("trailing garbage: expected end of file after the gzip stream, found byte 0x{:02x}",
                     zs_.next_in[0]));
  }

  std::FILE* f_;
  const std::string& path_;
  std::vector<uint8_t> in_;
  z_stream zs_;
  bool eof_ = false, done_ = false, truncated_ = false;
};

const char* idx_dtype_name(uint8_t code) {
  switch (code) {
    case 0x08: return "u8";
    case 0x09: return "i8";
    case 0x0B: return "i16";
    case 0x0C: return "i32";
    case 0x0D: return "f32";
    case 0x0E: return "f64";
    default: return nullptr;
  }
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "a special file";
}

// Opens `path` for reading, refusing anything but a regular file first: opening a FIFO
// blocks until a writer comes, and a device may never end.
File open_regular(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail(ErrorCode::io, path, std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    fail(ErrorCode::io, path,
         fmt::format("expected a regular file, found {}", file_kind(st.st_mode)));
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(ErrorCode::io, path, std::string("cannot open: ") + std::strerror(errno));
  return f;
}

}  // namespace

Tensor read_idx(const std::string& path, int expected_rank) {
  File f = open_regular(path);

  // gzip or raw, judged by the first two bytes.
  std::array<uint8_t, 2> lead{};
  const size_t nlead = std::fread(lead.data(), 1, 2, f.get());
  if (std::ferror(f.get())) fail(ErrorCode::io, path, std::string("read failed: ") + std::strerror(errno));
  const bool gzip = nlead == 2 && lead[0] == 0x1f && lead[1] == 0x8b;
  if (std::fseek(f.get(), 0, SEEK_END) != 0) fail(ErrorCode::io, path, std::string("seek failed: ") + std::strerror(errno));
  const long file_size = std::ftell(f.get());
  std::rewind(f.get());

  std::unique_ptr<ByteSource> src;
  if (gzip)
    src = std::make_unique<GzipSource>(f.get(), path);
  else
    src = std::make_unique<RawSource>(f.get(), path);
  const char* kind = gzip ? "gzip" : "raw";

  std::array<uint8_t, 4> magic{};
  const size_t nmagic = src->read(magic.data(), 4);
  if (nmagic < 4)
    fail(ErrorCode::format, path,
         fmt::format("truncated: expected a 4-byte IDX magic, found {} bytes ({} file)", nmagic, kind));
  if (magic[0] != 0 || magic[1] != 0)
    fail(ErrorCode::format, path,
         fmt::format("bad magic: expected 0x000008RR (IDX u8, rank RR), found 0x{:08x} ({} file)",
                     be32(magic.data()), kind));
  const uint8_t dtype = magic[2];
  if (dtype != 0x08) {
    const char* name = idx_dtype_name(dtype);
    if (name)
      fail(ErrorCode::format, path,
           fmt::format("unsupported IDX dtype 0x{:02x} ({}): expected 0x08 (u8)", dtype, name));
    fail(ErrorCode::format, path, fmt::format("bad IDX dtype code 0x{:02x}: expected 0x08 (u8)", dtype));
  }
  const int rank = magic[3];
  if (rank < 1 || rank > 4)
    fail(ErrorCode::format, path, fmt::format("bad rank: expected 1..4, found {}", rank));
  if (expected_rank > 0 && rank != expected_rank)
    fail(ErrorCode::format, path,
         fmt::format("expected rank {} (magic 0x000008{:02x}), found rank {} (magic 0x{:08x})", expected_rank,
                     expected_rank, rank, be32(magic.data())));

  std::array<uint8_t, 16> dimbytes{};
  const size_t ndim = src->read(dimbytes.data(), 4 * static_cast<size_t>(rank));
  if (ndim < 4 * static_cast<size_t>(rank))
    fail(ErrorCode::format, path,
         fmt::format("truncated: expected {} bytes of dimensions for rank {}, found {}", 4 * rank, rank, ndim));
  Shape shape(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) shape[static_cast<size_t>(d)] = be32(dimbytes.data() + 4 * d);
  uint64_t payload = 1;
  for (const int64_t dim : shape) {
    // four u32 dimensions can overflow 64 bits; cap far below that.
    if (__builtin_mul_overflow(payload, static_cast<uint64_t>(dim), &payload) || payload > (uint64_t{1} << 48))
      fail(ErrorCode::format, path, fmt::format("bad dimensions {}: more than 2^48 bytes", shape_str(shape)));
  }
  // Refuse headers that the file cannot possibly back before allocating for them.
  const uint64_t header = 4 + 4 * static_cast<uint64_t>(rank);
  if (file_size >= 0) {
    const uint64_t fsize = static_cast<uint64_t>(file_size);
    if (!gzip && payload > fsize - std::min(fsize, header))
      fail(ErrorCode::format, path,
           fmt::format("truncated: expected {} payload bytes for shape {}, found {}", payload, shape_str(shape),
                       fsize - std::min(fsize, header)));
    // deflate expands by at most 1032:1 (zlib FAQ); allow slack for headers.
    if (gzip && payload > fsize * 1032 + 1024)
      fail(ErrorCode::format, path,
           fmt::format("truncated: expected {} payload bytes for shape {}, but a {}-byte gzip file holds at most {}",
                       payload, shape_str(shape), fsize, fsize * 1032 + 1024));
  }

  Tensor t = Tensor::empty(shape, DType::u8);
  uint8_t* dst = payload ? t.data<uint8_t>() : nullptr;
  const size_t got = payload ? src->read(dst, payload) : 0;
  if (got < payload)
    fail(ErrorCode::format, path,
         fmt::format("truncated: expected {} payload bytes for shape {}, found {}{}", payload, shape_str(shape), got,
                     src->truncated() ? " (gzip stream ended early)" : ""));
  uint8_t extra = 0;
  const size_t more = src->read(&extra, 1);
  if (more)
    fail(ErrorCode::format, path,
         fmt::format("trailing bytes: expected end of data after {} payload bytes for shape {}{}", payload,
                     shape_str(shape), gzip ? " (in the decompressed stream)" : ""));
  if (src->truncated())
    fail(ErrorCode::format, path, "truncated gzip stream: the payload is complete but the gzip trailer is missing");
  return t;
}

}  // namespace tandem::data
