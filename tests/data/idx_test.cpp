#include "tandem/data/idx.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "data/temp_dir.h"

using namespace tandem;
using namespace tandem::testing;
using tandem::data::read_idx;

namespace {

// Runs read_idx and returns the Error it throws; fails the test when it does not throw.
Error idx_error(const std::string& path) {
  try {
    read_idx(path);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "read_idx(" << path << ") did not throw";
  return Error(ErrorCode::internal, "");
}

void expect_format_error(const std::string& path, const std::string& needle) {
  const Error e = idx_error(path);
  EXPECT_EQ(e.code(), ErrorCode::format) << e.what();
  const std::string msg = e.what();
  EXPECT_NE(msg.find("[idx] " + path), std::string::npos) << msg;
  EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "' in: " << msg;
}

void expect_values(const Tensor& t, const Shape& shape, const Bytes& payload) {
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(t.dtype(), DType::u8);
  ASSERT_EQ(static_cast<size_t>(t.numel()), payload.size());
  const uint8_t* p = t.data<uint8_t>();
  for (size_t i = 0; i < payload.size(); ++i) ASSERT_EQ(p[i], payload[i]) << "at " << i;
}

}  // namespace

TEST(Idx, ReadsRawAndGzipOfEveryRank) {
  TempDir dir;
  const std::vector<std::vector<uint32_t>> shapes{{7}, {3, 5}, {4, 3, 5}, {2, 3, 4, 5}};
  for (const auto& dims : shapes) {
    size_t n = 1;
    Shape shape;
    for (uint32_t d : dims) n *= d, shape.push_back(d);
    const Bytes payload = pattern(n, static_cast<uint32_t>(dims.size()));
    const Bytes file = idx_bytes(dims, payload);
    write_file(dir.file("a"), file);
    write_file(dir.file("a.gz"), gzip(file));
    expect_values(read_idx(dir.file("a")), shape, payload);
    expect_values(read_idx(dir.file("a.gz")), shape, payload);
  }
}

TEST(Idx, DetectsGzipByBytesNotByName) {
  TempDir dir;
  const Bytes payload = pattern(60);
  const Bytes file = idx_bytes({3, 4, 5}, payload);
  write_file(dir.file("raw-named.gz"), file);        // raw content, .gz name
  write_file(dir.file("gz-named-raw"), gzip(file));  // gzip content, raw name
  expect_values(read_idx(dir.file("raw-named.gz")), {3, 4, 5}, payload);
  expect_values(read_idx(dir.file("gz-named-raw")), {3, 4, 5}, payload);
}

TEST(Idx, AcceptsConcatenatedGzipMembers) {
  TempDir dir;
  const Bytes payload = pattern(1000);
  const Bytes file = idx_bytes({10, 100}, payload);
  Bytes a = gzip(Bytes(file.begin(), file.begin() + 300));
  const Bytes b = gzip(Bytes(file.begin() + 300, file.end()));
  a.insert(a.end(), b.begin(), b.end());
  write_file(dir.file("two-members.gz"), a);
  expect_values(read_idx(dir.file("two-members.gz")), {10, 100}, payload);
}

TEST(Idx, EmptyPayloadIsAllowed) {
  TempDir dir;
  write_file(dir.file("empty"), idx_bytes({0, 28, 28}, {}));
  const Tensor t = read_idx(dir.file("empty"));
  EXPECT_EQ(t.shape(), (Shape{0, 28, 28}));
}

TEST(Idx, RejectsBadMagicDtypeAndRank) {
  TempDir dir;
  Bytes bad = idx_bytes({4}, pattern(4));
  bad[1] = 0x01;
  write_file(dir.file("magic"), bad);
  expect_format_error(dir.file("magic"), "bad magic: expected 0x000008RR");
  write_file(dir.file("magic.gz"), gzip(bad));
  expect_format_error(dir.file("magic.gz"), "found 0x00010801 (gzip file)");

  write_file(dir.file("f32"), idx_bytes({4}, pattern(16), 0x0D));
  expect_format_error(dir.file("f32"), "unsupported IDX dtype 0x0d (f32): expected 0x08 (u8)");
  write_file(dir.file("dtype"), idx_bytes({4}, pattern(4), 0x07));
  expect_format_error(dir.file("dtype"), "bad IDX dtype code 0x07");

  write_file(dir.file("rank0"), idx_bytes({}, {}));
  expect_format_error(dir.file("rank0"), "bad rank: expected 1..4, found 0");
  write_file(dir.file("rank5"), idx_bytes({1, 1, 1, 1, 1}, {7}));
  expect_format_error(dir.file("rank5"), "bad rank: expected 1..4, found 5");

  write_file(dir.file("short-header"), Bytes{0, 0, 8});
  expect_format_error(dir.file("short-header"), "expected a 4-byte IDX magic, found 3 bytes");
  write_file(dir.file("short-dims"), Bytes{0, 0, 8, 3, 0, 0, 0, 9});
  expect_format_error(dir.file("short-dims"), "expected 12 bytes of dimensions for rank 3, found 4");
}

TEST(Idx, RejectsTruncatedRawAndGzip) {
  TempDir dir;
  const Bytes file = idx_bytes({10, 6}, pattern(60));
  write_file(dir.file("short"), Bytes(file.begin(), file.end() - 10));
  expect_format_error(dir.file("short"), "truncated: expected 60 payload bytes for shape [10, 6], found 50");

  // Payload short inside a complete gzip stream.
  write_file(dir.file("short-payload.gz"), gzip(Bytes(file.begin(), file.end() - 10)));
  expect_format_error(dir.file("short-payload.gz"), "truncated: expected 60 payload bytes for shape [10, 6], found 50");

  // The gzip stream itself cut short: in the deflate data, and in the 8-byte trailer only.
  const Bytes big = idx_bytes({100, 100}, pattern(10000));
  const Bytes gz = gzip(big);
  write_file(dir.file("cut.gz"), Bytes(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2)));
  expect_format_error(dir.file("cut.gz"), "(gzip stream ended early)");
  write_file(dir.file("cut-trailer.gz"), Bytes(gz.begin(), gz.end() - 4));
  expect_format_error(dir.file("cut-trailer.gz"), "the gzip trailer is missing");
}

TEST(Idx, RejectsTrailingBytes) {
  TempDir dir;
  Bytes file = idx_bytes({10, 6}, pattern(60));
  file.push_back(0);
  write_file(dir.file("long"), file);
  expect_format_error(dir.file("long"), "trailing bytes: expected end of data after 60 payload bytes");
  write_file(dir.file("long.gz"), gzip(file));
  expect_format_error(dir.file("long.gz"), "(in the decompressed stream)");

  Bytes gz = gzip(idx_bytes({10, 6}, pattern(60)));
  gz.push_back('x');
  write_file(dir.file("garbage.gz"), gz);
  expect_format_error(dir.file("garbage.gz"), "trailing garbage: expected end of file after the gzip stream, found byte 0x78");
}

TEST(Idx, RejectsCorruptGzip) {
  TempDir dir;
  Bytes gz = gzip(idx_bytes({100, 100}, pattern(10000)));
  gz[gz.size() - 6] ^= 0xff;  // inside the CRC-32 of the trailer
  write_file(dir.file("crc.gz"), gz);
  expect_format_error(dir.file("crc.gz"), "corrupt gzip stream");
}

TEST(Idx, RejectsHeadersTheFileCannotBack) {
  TempDir dir;
  // 2^31 * 2^16 bytes promised by a 30-byte file: refused before allocating anything.
  write_file(dir.file("huge"), idx_bytes({1u << 31, 1u << 16}, pattern(10)));
  expect_format_error(dir.file("huge"), "truncated: expected 140737488355328 payload bytes");
  write_file(dir.file("huge.gz"), gzip(idx_bytes({1u << 31, 1u << 16}, pattern(10))));
  expect_format_error(dir.file("huge.gz"), "gzip file holds at most");
  write_file(dir.file("overflow"), idx_bytes({0xffffffffu, 0xffffffffu, 0xffffffffu}, {}));
  expect_format_error(dir.file("overflow"), "more than 2^48 bytes");
  // The message quotes every dimension of the header, not 0 for those after the overflow.
  expect_format_error(dir.file("overflow"), "[4294967295, 4294967295, 4294967295]");
}

TEST(Idx, MissingAndUnreadableFilesAreIoErrors) {
  TempDir dir;
  Error e = idx_error(dir.file("nope"));
  EXPECT_EQ(e.code(), ErrorCode::io);
  EXPECT_NE(std::string(e.what()).find("cannot open: No such file or directory"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(dir.file("nope")), std::string::npos) << e.what();

  e = idx_error(dir.str());
  EXPECT_EQ(e.code(), ErrorCode::io) << e.what();
  EXPECT_EQ(std::string(e.what()),
            "[idx] " + dir.str() + ": expected a regular file, found a directory");
}

// A FIFO (or a terminal, a socket) where a data file should be used to block open() until a
// writer came: `tandem train` hung. It is refused before it is opened.
TEST(Idx, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("train-images-idx3-ubyte");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto result = std::make_shared<std::promise<std::string>>();
  std::future<std::string> got = result->get_future();
  std::thread([fifo, result] {
    try {
      read_idx(fifo);
      result->set_value("no error");
    } catch (const Error& e) {
      result->set_value(e.what());
    }
  }).detach();
  if (got.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "read_idx blocked on a FIFO";
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // let the reader see EOF and return
    if (w >= 0) ::close(w);
    got.wait();
    return;
  }
  EXPECT_EQ(got.get(), "[idx] " + fifo + ": expected a regular file, found a FIFO");
  EXPECT_EQ(idx_error("/dev/null").what(),
            std::string("[idx] /dev/null: expected a regular file, found a device"));
}
