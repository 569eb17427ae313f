// JsonLinesWriter: a metrics file with one JSON object per line (JSON Lines), each line
// written and flushed as it comes, so that a file being written can be followed (`tail -f`)
// and a run that stops keeps every record it wrote. Record schema: docs/metrics.md.
// Errors: Error(io, "[metrics] <path>: ...") when the file cannot be created or a write fails.
// Thread-safety: one thread at a time per writer.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::metrics {

class JsonLinesWriter {
 public:
  /// Creates (or truncates) `path`.
  explicit JsonLinesWriter(const std::string& path);
  ~JsonLinesWriter();
  JsonLinesWriter(const JsonLinesWriter&) = delete;
  JsonLinesWriter& operator=(const JsonLinesWriter&) = delete;

  /// Appends `record` (an object) as one line and flushes it. NaN and infinite numbers are
  /// written as null (JSON has no NaN).
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

/// Reads a JSON-lines file back: one object per non-empty line. Throws Error(io) naming the
/// path when it cannot be read, Error(format, "[metrics] <path>:<line>: ...") for a line that
/// is not a JSON object.
std::vector<nlohmann::json> read_json_lines(const std::string& path);

}  // namespace tandem::metrics
