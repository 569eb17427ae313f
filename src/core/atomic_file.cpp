#include "tandem/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "tandem/error.h"

namespace tandem {
namespace {

// Temporary files to remove when a signal ends the process. The handler may only read them:
// each slot holds a path in a fixed buffer and an atomic "in use" flag set after the path.
constexpr int kSlots = 8;
constexpr size_t kPathMax = 4096;
struct Slot {
  std::atomic<bool> used{false};
  char path[kPathMax];
};
Slot g_slots[kSlots];

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
constexpr int kNumSignals = 4;
struct sigaction g_previous[kNumSignals];
bool g_installed[kNumSignals];
std::mutex g_mu;  // guards installing and restoring the handlers and taking slots
int g_active = 0;
std::atomic<bool> g_defer_stop{false};

void unlink_temporaries() noexcept {
  for (Slot& s : g_slots)
    if (s.used.load(std::memory_order_acquire)) ::unlink(s.path);
}

extern "C" void remove_temporaries(int sig) {
  if (g_defer_stop.load() && (sig == SIGINT || sig == SIGTERM)) {
    // The program stops cleanly on these: hand the signal to its handler, files untouched.
    for (int i = 0; i < kNumSignals; ++i)
      if (kSignals[i] == sig && g_previous[i].sa_handler != SIG_DFL && g_previous[i].sa_handler != SIG_IGN)
        g_previous[i].sa_handler(sig);
    return;
  }
  unlink_temporaries();
  // Take the action the signal had before (by default: end the process with it).
  for (int i = 0; i < kNumSignals; ++i)
    if (kSignals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
  ::raise(sig);
}

int take_slot(const std::string& path) {
  if (path.size() >= kPathMax) return -1;  // not cleaned on a signal; still removed on errors
  std::lock_guard<std::mutex> lock(g_mu);
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[i];
    if (s.used.load(std::memory_order_relaxed)) continue;
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    s.used.store(true, std::memory_order_release);
    if (g_active++ == 0) {
      struct sigaction sa {};
      sa.sa_handler = remove_temporaries;
      sigemptyset(&sa.sa_mask);
      for (int k = 0; k < kNumSignals; ++k) {
        // A signal the process ignores (nohup, a background job) stays ignored: the write
        // goes on, and removing its file would lose it.
        ::sigaction(kSignals[k], nullptr, &g_previous[k]);
        g_installed[k] = g_previous[k].sa_handler != SIG_IGN;
        if (g_installed[k]) ::sigaction(kSignals[k], &sa, nullptr);
      }
    }
    return i;
  }
  return -1;
}

void release_slot(int i) {
  if (i < 0) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_slots[i].used.store(false, std::memory_order_release);
  if (--g_active == 0)
    for (int k = 0; k < kNumSignals; ++k)
      if (g_installed[k]) ::sigaction(kSignals[k], &g_previous[k], nullptr);
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string op)
    : path_(std::move(path)), op_(std::move(op)), tmp_(fmt::format("{}.tmp-{}", path_, ::getpid())) {
  // A new file gets 0644 less the umask; a replacement keeps the permissions of the file it
  // replaces (a private 0600 file stays private), set before any byte is written.
  struct stat st {};
  const bool exists = ::stat(path_.c_str(), &st) == 0;
  // Renaming over a device, FIFO or socket would replace the node itself (as root, /dev/full
  // became a PNG); over a folder it fails, but only after the whole write.
  TD_CHECK(!exists || S_ISREG(st.st_mode), ErrorCode::io, op_, "{}: expected a regular file path, found {}", path_,
           S_ISDIR(st.st_mode) ? "a folder" : "a special file (device, FIFO or socket)");
  const bool replaces = exists;
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    throw_error(ErrorCode::io, op_,
                fmt::format("{}: cannot create the temporary file {}: {}", path_, tmp_, std::strerror(err)));
  }
  // Registered only once the file is ours: a signal must never remove someone else's file.
  slot_ = take_slot(tmp_);
  if (replaces && ::fchmod(fd_, st.st_mode & 07777) != 0) fail("cannot set the file's permissions", errno);
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
  release_slot(slot_);
}

void AtomicFile::defer_stop_signals(bool on) noexcept { g_defer_stop.store(on); }

void AtomicFile::remove_temporaries() noexcept { unlink_temporaries(); }

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
}

void AtomicFile::fail(const std::string& what, int err) {
  discard();
  throw_error(ErrorCode::io, op_, fmt::format("{}: {}: {}", path_, what, std::strerror(err)));
}

void AtomicFile::write(const void* data, size_t bytes) {
  TD_CHECK(fd_ >= 0, ErrorCode::io, op_, "{}: write after the file was committed or failed", path_);
  const char* c = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t w = ::write(fd_, c, bytes);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("write failed", errno);
    }
    c += w;
    bytes -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  TD_CHECK(fd_ >= 0, ErrorCode::io, op_, "{}: commit after the file was committed or failed", path_);
  if (::fsync(fd_) != 0) fail("fsync failed", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close failed", errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("rename failed", errno);
  committed_ = true;
  // The rename lives in the folder's entries: flush them too. A folder that cannot be opened
  // for reading (rare) or fsynced (some file systems refuse) leaves the file complete anyway.
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace tandem
