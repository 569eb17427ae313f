// DiskStore: flat host buffers whose home is a file each under an offload folder (the disk
// tier of the optimizer's state: docs/disk-offload.md). Each flat is a virtual image in this
// process (an anonymous mapping reserved for its whole size, no swap reserved) whose pages are
// backed only while a unit of it is in memory: the owner cuts the flats into units (element
// ranges common to every flat: the offloaded optimizer's buckets), acquire()s a unit before
// touching it and release()s it after. A unit in memory has a slot of a memfd mapped at its
// ranges (page-aligned, resident: the bounce buffers O_DIRECT reads into and writes from; a
// slot's pages are reused, never zero-filled again by the kernel). A released unit is written
// back behind (write-behind) and its slot unmapped and freed once the write and the event the
// caller names (the upload that reads it) completed; acquire() reads a unit back, and starts
// reading the next units in the known order (read-ahead). At most `window` units are in
// memory (resident, being read or being written), so host memory stays bounded by the window
// times the largest unit, whatever the flats' size.
//
// Files: one per flat, created in the folder with O_DIRECT, sized with fallocate (the space is
// taken up front) and unlinked at once: they are scratch (checkpoints remain the durable
// copy), gone when the process ends, killed with -9 included. I/O: IoEngine (io_uring, else a
// pread/pwrite pool), O_DIRECT between the file and page-aligned memory, several requests in
// flight. A unit never written is all zeros and is not read.
// Errors: I/O errors throw Error(io) from the acquire or release that waits for them.
// Thread-safety: every member may be called from any thread (one mutex); the flats' memory
// of a unit is the acquirer's between acquire and release.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tandem/stream.h"
#include "tandem/tensor.h"

namespace tandem::storage {

struct DiskStoreOptions {
  std::string dir;                 // the offload folder (check_offload_dir's rules)
  int queue_depth = 8;             // requests in flight
  size_t request_bytes = 1 << 20;  // bytes per request, a multiple of 4096
  int read_ahead = 2;              // units read ahead of the one acquired, in unit order
  int window = 0;                  // units in memory at most; 0: read_ahead + 3
  bool force_threads = false;      // the pread/pwrite pool, not io_uring
  double model_read_gbps = 0;      // planning: a modelled drive (IoEngine::set_model); 0: the real disk alone
  double model_write_gbps = 0;
};

/// What the store has done since construction: bytes read and written, the seconds the disk
/// was busy with each direction (at least one request in flight), and the seconds its callers
/// were blocked in acquire() and release() waiting for it.
struct DiskFigures {
  uint64_t bytes_read = 0, bytes_written = 0;
  double read_seconds = 0, write_seconds = 0;
  double wait_seconds = 0;
  double lifetime_seconds = 0;  // since the store was made
  /// The share of the disk's busy time nobody waited for, in [0, 1] (1 with no I/O).
  double hidden_share() const {
    const double busy = read_seconds + write_seconds;
    return busy > 0 ? std::max(0.0, 1.0 - wait_seconds / busy) : 1.0;
  }
  double read_gbps() const { return read_seconds > 0 ? static_cast<double>(bytes_read) / read_seconds / 1e9 : 0; }
  double write_gbps() const { return write_seconds > 0 ? static_cast<double>(bytes_written) / write_seconds / 1e9 : 0; }
};

/// Refuses an offload folder with one line: throws Error(invalid_argument, "[train] --offload-dir
/// DIR: ...") when it is missing, not a folder, on a memory file system (tmpfs, ramfs: no disk,
/// whether or not it takes O_DIRECT), not writable, refuses O_DIRECT or has
/// fewer than `need_bytes` free (statvfs's f_bavail). Writes and removes one small probe file.
void check_offload_dir(const std::string& dir, uint64_t need_bytes);

/// Free bytes in `dir` for an unprivileged writer (statvfs); -1 when it cannot be read.
int64_t free_bytes(const std::string& dir);

class DiskStore {
 public:
  /// Elements a unit boundary is a multiple of: 4096 bytes of the narrowest dtype (2 bytes).
  static constexpr int64_t kUnitAlign = 2048;

  /// Starts the I/O engine. Throws Error(invalid_argument) for bad options.
  explicit DiskStore(DiskStoreOptions options);
  /// Waits for the I/O in flight (errors dropped), unmaps the flats and closes the files.
  ~DiskStore();
  DiskStore(const DiskStore&) = delete;
  DiskStore& operator=(const DiskStore&) = delete;

  /// Adds a flat of `numel` elements of `dtype` (its file named after `name`) and returns a
  /// host tensor over its image, all zeros, no page touched. Before set_units. Throws
  /// Error(io) when the file cannot be created or sized (ENOSPC), Error(out_of_memory) when the
  /// mapping cannot be reserved.
  Tensor add_flat(int64_t numel, DType dtype, const std::string& name);
  /// The units: ascending, disjoint element ranges [begin, end) of every flat, each begin a
  /// multiple of kUnitAlign (a unit's I/O runs to the end of its last page, which the next
  /// unit's aligned begin leaves free). Throws Error(invalid_argument) otherwise.
  void set_units(const std::vector<std::pair<int64_t, int64_t>>& ranges);
  int units() const;

  /// Blocks until unit `u` is in memory (read back, or its write-behind finished while its pages
  /// stayed), then starts reading units u + 1 .. u + read_ahead (mod units) when the window
  /// allows. Throws Error(io) for a failed read or write.
  void acquire(int u);
  /// Writes unit `u` back (write-behind) and gives its pages back once that write and `after`
  /// (null: none) completed; when the window is full, waits for the oldest write first.
  /// Throws Error(io) for a failed write it waited for, Error(invalid_argument) for a unit not
  /// acquired.
  void release(int u, const Event& after = Event());
  /// Every unit in memory (for whole-flat readers and writers: checkpoints, the master copy's
  /// first read); they stay until each is released. Host memory holds the whole flats then.
  void acquire_all();
  /// Releases every acquired unit and waits until all writes ended and pages went back.
  void release_all();

  /// The flats' bytes on disk, and the largest number of bytes the window can hold in memory.
  uint64_t disk_bytes() const;
  uint64_t window_bytes() const;
  DiskFigures figures() const;
  /// The banner's words: "N files, X GiB in DIR; io_uring, ...; read-ahead R, window W units".
  std::string describe() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::storage
