// Raw sequential O_DIRECT bandwidth of a folder, through the disk tier's own I/O engine at its
// request size and depth: the figure the disk tier's throughput (the "disk:" line of a run with
// --optimizer-state-device disk) is compared with.
// Usage: bench_disk DIR [MiB=1024] [request_KiB=1024] [depth=8] [threads=0] [fresh=0]
// Writes a scratch file of MiB (unlinked at once), then reads it back, each as one stream of
// requests, and prints
//   disk write_GBps <w> read_GBps <r> MiB <n> request_KiB <k> depth <d> engine <io_uring ...>
// (decimal GB/s). threads=1 uses the pread/pwrite pool instead of io_uring; fresh=1 gives the
// buffer's pages back (MADV_DONTNEED) before the read, as the disk tier reads into them.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tandem/storage/io_engine.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_disk DIR [MiB=1024] [request_KiB=1024] [depth=8] [threads=0]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const size_t mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024;
  const size_t request = (argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1024) << 10;
  const int depth = argc > 4 ? std::atoi(argv[4]) : 8;
  const bool threads = argc > 5 && std::atoi(argv[5]) != 0;
  const bool fresh = argc > 6 && std::atoi(argv[6]) != 0;
  const size_t bytes = mib << 20;
  const std::string path = dir + "/tandem-bench-disk-" + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT, 0600);
  if (fd < 0) {
    std::fprintf(stderr, "bench_disk: cannot open %s with O_DIRECT: %s\n", path.c_str(), std::strerror(errno));
    return 1;
  }
  ::unlink(path.c_str());
  if (::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) != 0) {
    std::fprintf(stderr, "bench_disk: cannot allocate %zu MiB in %s\n", mib, dir.c_str());
    return 1;
  }
  void* buf = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) return 1;
  std::memset(buf, 0x5a, bytes);
  tandem::storage::IoEngine io(depth, request, threads);
  double gbps[2] = {0, 0};
  for (int w = 1; w >= 0; --w) {  // write first, then read it back
    if (w == 0 && fresh) ::madvise(buf, bytes, MADV_DONTNEED);
    const double t0 = now_s();
    if (w == 0 && fresh) ::madvise(buf, bytes, 23 /* MADV_POPULATE_WRITE */);  // as the tier does before a read
    io.wait(io.submit({{fd, buf, bytes, 0, w == 1}}));
    gbps[w] = static_cast<double>(bytes) / (now_s() - t0) / 1e9;
  }
  std::printf("disk write_GBps %.3f read_GBps %.3f MiB %zu request_KiB %zu depth %d%s engine %s\n", gbps[1],
              gbps[0], mib, request >> 10, depth, fresh ? " fresh" : "", io.describe().c_str());
  ::close(fd);
  return 0;
}
