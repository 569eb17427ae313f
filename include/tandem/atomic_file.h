// AtomicFile: writes a file so that it is either left as it was or replaced by the complete new
// contents -- never half-written. The bytes go to a temporary file next to it,
// "<path>.tmp-<pid>" (created exclusively: an existing file of that name is not touched), which
// commit() flushes to disk (fsync) and renames over `path`. Destroying an AtomicFile that was
// not committed (an error, an exception) removes the temporary file. While it exists,
// SIGINT, SIGTERM, SIGHUP and SIGQUIT first remove the temporary file, then take their
// previous action (by default: end the process), so Ctrl-C during a write leaves nothing
// behind either; a signal the process ignores (nohup) stays ignored and the write goes on.
// A replaced file keeps its permissions; a new one gets 0644 less the umask. commit() also
// fsyncs the folder, so the rename itself survives a power cut.
// A program that handles SIGINT and SIGTERM itself (to stop cleanly after the current step)
// calls defer_stop_signals(true): those two then go straight to its handler, which must call
// remove_temporaries() before it ends the process.
//
// Errors: Error(io, "[<op>] <path>: ...") naming the path (and the temporary file when it cannot
// be created) and the system's reason (strerror), from the constructor, write() and commit().
// The constructor refuses a `path` that exists and is not a regular file (after following
// links): "<path>: expected a regular file path, found a folder" / "a special file (...)".
// Thread-safety: one AtomicFile is used by one thread; several may exist at once (up to 8 have
// their temporary files removed on a signal).
#pragma once

#include <cstddef>
#include <string>

namespace tandem {

class AtomicFile {
 public:
  /// Creates the temporary file. `op` tags error messages ("safetensors", "trace").
  AtomicFile(std::string path, std::string op);
  /// Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  /// Appends `bytes` bytes (retries short writes and EINTR).
  void write(const void* data, size_t bytes);
  /// fsync, close, rename over the target path. After it the file is complete at `path`.
  void commit();

  const std::string& temp_path() const { return tmp_; }

  /// While `on`, SIGINT and SIGTERM reach the handler the program installed before the first
  /// AtomicFile opened, without removing the temporary files (a write in progress goes on).
  /// Thread-safe.
  static void defer_stop_signals(bool on) noexcept;
  /// Removes the temporary file of every AtomicFile alive now. Async-signal-safe: for a
  /// signal handler about to end the process (_exit).
  static void remove_temporaries() noexcept;

 private:
  [[noreturn]] void fail(const std::string& what, int err);
  void discard() noexcept;

  std::string path_, op_, tmp_;
  int fd_ = -1;
  int slot_ = -1;  // entry in the signal-time cleanup list
  bool committed_ = false;
};

}  // namespace tandem
