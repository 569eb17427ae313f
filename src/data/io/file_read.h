// Plain file reads shared by the dataset readers: a whole file into a buffer with one
// open/read/close, a regular file's size, a folder's sorted entries, a text file's lines. Errors are Error(io,
// "[<op>] <path>: <what>: <strerror>").
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::data::io {

/// Whether `path` exists (any kind of file). Never throws.
bool exists(const std::string& path) noexcept;
/// Whether `path` is a folder (symbolic links followed). Never throws.
bool is_directory(const std::string& path) noexcept;

/// What `path` is when it is not a regular file, for error messages: "a directory", "a special
/// file" (FIFO, device, socket), "a broken link", "a link that cannot be followed: <strerror>"
/// (e.g. a loop), or "nothing: <strerror>". Never throws.
std::string describe_non_regular(const std::string& path);

/// The size in bytes of the regular file `path`. Throws Error(io) when it cannot be stat'ed
/// or is not a regular file.
uint64_t regular_file_size(const std::string& path, const char* op);

/// Reads all of `path` into `out` (resized to the file's size; its capacity is reused): open,
/// fstat, read until done (EINTR and short reads retried), close. Returns the size. Throws
/// Error(io) naming the path and the system's reason.
size_t read_file_into(const std::string& path, const char* op, std::vector<uint8_t>& out);

struct DirEntry {
  std::string name;
  bool is_dir = false;      // a folder (symbolic links followed)
  bool is_regular = false;  // a regular file (symbolic links followed)
};

/// The entries of folder `path` but "." and "..", sorted by name in byte order. Throws
/// Error(io) naming the folder when it cannot be opened or read.
std::vector<DirEntry> list_directory(const std::string& path, const char* op);

/// The lines of text file `path`, without line ends ("\n" or "\r\n"); trailing empty lines
/// dropped. Throws as read_file_into().
std::vector<std::string> read_lines(const std::string& path, const char* op);

}  // namespace tandem::data::io
