// check_offload_dir and free_bytes (tandem/storage/disk_store.h): an offload folder is refused
// with one line before anything is allocated.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/storage/disk_store.h"

namespace tandem::storage {

namespace {
constexpr const char* kOp = "train";

std::string gib(uint64_t b) { return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1ull << 30)); }
}  // namespace

int64_t free_bytes(const std::string& dir) {
  struct statvfs s {};
  if (::statvfs(dir.c_str(), &s) != 0) return -1;
  return static_cast<int64_t>(s.f_bavail) * static_cast<int64_t>(s.f_frsize);
}

void check_offload_dir(const std::string& dir, uint64_t need_bytes) {
  struct stat st {};
  TD_CHECK_ARG(!dir.empty(), kOp, "--offload-dir: expected a folder for the disk tier's files");
  TD_CHECK_ARG(::stat(dir.c_str(), &st) == 0, kOp, "--offload-dir {}: {}", dir, std::strerror(errno));
  TD_CHECK_ARG(S_ISDIR(st.st_mode), kOp, "--offload-dir {}: not a folder", dir);
  // A memory file system is no disk: its files would take the host memory the tier frees
  // (tmpfs takes O_DIRECT since Linux 6.6, so the probe below would not refuse it).
  struct statfs fs {};
  constexpr long kTmpfs = 0x01021994, kRamfs = 0x858458f6;
  TD_CHECK_ARG(::statfs(dir.c_str(), &fs) != 0 || (fs.f_type != kTmpfs && fs.f_type != kRamfs), kOp,
               "--offload-dir {}: a memory file system ({}), not a disk: its files would take host memory; expected "
               "a folder on a disk (e.g. /var/tmp)",
               dir, fs.f_type == kTmpfs ? "tmpfs" : "ramfs");
  TD_CHECK_ARG(::access(dir.c_str(), W_OK | X_OK) == 0, kOp, "--offload-dir {}: not writable ({})", dir,
               std::strerror(errno));
  const std::string probe = fmt::format("{}/.tandem-probe-{}", dir, ::getpid());
  int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  TD_CHECK_ARG(fd >= 0, kOp, "--offload-dir {}: not writable ({})", dir, std::strerror(errno));
  ::close(fd);
  // O_DIRECT: the open (tmpfs before Linux 6.6 refuses it there) and one aligned write.
  fd = ::open(probe.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0) {
    void* page = nullptr;
    if (::posix_memalign(&page, 4096, 4096) == 0) {
      std::memset(page, 0, 4096);
      if (::pwrite(fd, page, 4096, 0) != 4096) err = errno != 0 ? errno : EIO;
      std::free(page);
    }
    ::close(fd);
  }
  ::unlink(probe.c_str());
  TD_CHECK_ARG(err == 0, kOp, "--offload-dir {}: refuses O_DIRECT ({}); expected a folder on a disk's file system, "
               "not tmpfs", dir, std::strerror(err));
  const int64_t avail = free_bytes(dir);
  TD_CHECK_ARG(avail < 0 || static_cast<uint64_t>(avail) >= need_bytes, kOp,
               "--offload-dir {}: {} free, the disk tier's files need {}", dir, gib(static_cast<uint64_t>(avail)),
               gib(need_bytes));
}

}  // namespace tandem::storage
