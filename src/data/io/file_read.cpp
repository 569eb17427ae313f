#include "data/io/file_read.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <memory>

#include "tandem/error.h"

namespace tandem::data::io {

namespace {
[[noreturn]] void fail(const char* op, const std::string& path, const char* what, int err) {
  throw_error(ErrorCode::io, op, fmt::format("{}: {}: {}", path, what, std::strerror(err)));
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace

bool exists(const std::string& path) noexcept {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) noexcept {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string describe_non_regular(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? "a directory" : "a special file";
  const int err = errno;
  if (::lstat(path.c_str(), &st) != 0) return std::string("nothing: ") + std::strerror(errno);
  if (err == ENOENT) return "a broken link";
  return std::string("a link that cannot be followed: ") + std::strerror(err);
}

uint64_t regular_file_size(const std::string& path, const char* op) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(op, path, "cannot open", errno);
  TD_CHECK(S_ISREG(st.st_mode), ErrorCode::io, op, "{}: expected a regular file, found {}", path,
           S_ISDIR(st.st_mode) ? "a directory" : "a special file");
  return static_cast<uint64_t>(st.st_size);
}

size_t read_file_into(const std::string& path, const char* op, std::vector<uint8_t>& out) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};  // a FIFO must not block
  if (f.fd < 0) fail(op, path, "cannot open", errno);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail(op, path, "cannot stat", errno);
  TD_CHECK(S_ISREG(st.st_mode), ErrorCode::io, op, "{}: expected a regular file, found {}", path,
           S_ISDIR(st.st_mode) ? "a directory" : "a special file");
  const size_t size = static_cast<size_t>(st.st_size);
  out.resize(size);
  size_t got = 0;
  while (got < size) {
    const ssize_t r = ::read(f.fd, out.data() + got, size - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(op, path, "read failed", errno);
    }
    if (r == 0) break;  // the file shrank while being read
    got += static_cast<size_t>(r);
  }
  TD_CHECK(got == size, ErrorCode::io, op, "{}: read {} of {} bytes: the file shrank while being read", path,
           got, size);
  return size;
}

std::vector<DirEntry> list_directory(const std::string& path, const char* op) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(path.c_str()), ::closedir);
  if (!d) fail(op, path, "cannot list folder", errno);
  std::vector<DirEntry> out;
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(d.get());
    if (!e) {
      if (errno != 0) fail(op, path, "cannot list folder", errno);
      break;
    }
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    DirEntry entry{name};
    struct stat st {};
    if (::stat((path + "/" + name).c_str(), &st) == 0) {
      entry.is_dir = S_ISDIR(st.st_mode);
      entry.is_regular = S_ISREG(st.st_mode);
    }
    out.push_back(std::move(entry));
  }
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return out;
}

std::vector<std::string> read_lines(const std::string& path, const char* op) {
  std::vector<uint8_t> bytes;
  read_file_into(path, op, bytes);
  std::vector<std::string> lines;
  std::string line;
  for (const uint8_t b : bytes) {
    if (b == '\n') {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(std::move(line));
      line.clear();
    } else {
      line.push_back(static_cast<char>(b));
    }
  }
  if (!line.empty()) lines.push_back(std::move(line));
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

}  // namespace tandem::data::io
