// IoEngine: asynchronous whole-buffer reads and writes of files, several requests in flight.
// It submits through io_uring (liburing) when the build has it and io_uring_queue_init
// succeeds (a kernel or seccomp policy may refuse it), else through a pool of threads that
// call pread / pwrite; describe() says which. Every region is cut into requests of at most
// `request_bytes`; at most `depth` of them are in flight at once, queued reads starting before
// queued writes (a caller waits for a read; writes run behind its work). Regions opened with O_DIRECT
// need page-aligned buffers, offsets and lengths (the disk store's are).
// Profiling: the engine's thread ("disk io"; the pool's "disk io N") records a "disk read" and
// a "disk write" span (Stage::other) over each interval with requests of that direction in flight.
// Errors: a failed or short request fails its ticket; wait() throws Error(io) naming the file
// offset and errno's text. The engine itself goes on serving later tickets.
// Thread-safety: submit, done and wait may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tandem::storage {

/// One region of a file: `len` bytes at file offset `offset` from or into `buf`.
struct IoRegion {
  int fd = -1;
  void* buf = nullptr;
  size_t len = 0;
  uint64_t offset = 0;
  bool write = false;
};

/// Totals since construction: bytes and requests done per direction, and the nanoseconds
/// during which at least one request of that direction was in flight (the disk's busy time).
struct IoTotals {
  uint64_t bytes_read = 0, bytes_written = 0;
  uint64_t requests = 0;
  int64_t read_busy_ns = 0, write_busy_ns = 0;
};

class IoEngine {
 public:
  /// `depth` >= 1 requests in flight, `request_bytes` > 0 (a multiple of 4096 for O_DIRECT).
  /// `force_threads`: skip io_uring (the TANDEM_IO=threads environment variable does the
  /// same). Starts the engine's thread(s). Throws Error(invalid_argument) for bad sizes.
  IoEngine(int depth, size_t request_bytes, bool force_threads = false);
  /// Waits for the requests in flight, then stops.
  ~IoEngine();
  IoEngine(const IoEngine&) = delete;
  IoEngine& operator=(const IoEngine&) = delete;

  /// Whether requests go through io_uring (false: the pread/pwrite pool).
  bool uring() const;
  /// "io_uring, 8 in flight, 1 MiB requests" or "pread/pwrite pool of 4 threads (io_uring:
  /// REASON), 1 MiB requests".
  std::string describe() const;
  /// Queues the regions as one ticket (> 0; 0 for no region, which is done at once). The
  /// buffers must stay valid until the ticket is done.
  uint64_t submit(const std::vector<IoRegion>& regions);
  /// Whether every request of `ticket` completed (successfully or not). Never throws.
  bool done(uint64_t ticket) const;
  /// Blocks until `ticket` completed; throws Error(io) if one of its requests failed.
  void wait(uint64_t ticket);
  IoTotals totals() const;
  /// Planning: models one drive of `read_gbps` and `write_gbps` (decimal GB/s, > 0; 0: off)
  /// that serves one request at a time: each request completes no earlier than the modelled
  /// drive would finish it (a faster real disk waits, a slower one is not hidden). Call before
  /// submitting.
  void set_model(double read_gbps, double write_gbps);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::storage
