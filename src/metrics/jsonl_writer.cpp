#include "tandem/metrics/jsonl_writer.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "tandem/error.h"

namespace tandem::metrics {

JsonLinesWriter::JsonLinesWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "w");
  TD_CHECK(file_ != nullptr, ErrorCode::io, "metrics", "{}: cannot create the metrics file: {}", path,
           std::strerror(errno));
}

JsonLinesWriter::~JsonLinesWriter() {
  if (file_) std::fclose(file_);
}

void JsonLinesWriter::write(const nlohmann::json& record) {
  // dump() writes NaN and infinities as null; a replacement error handler keeps bad UTF-8 from throwing.
  const std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const bool ok = std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0;
  TD_CHECK(ok, ErrorCode::io, "metrics", "{}: write failed: {}", path_, std::strerror(errno));
}

std::vector<nlohmann::json> read_json_lines(const std::string& path) {
  std::ifstream in(path);
  TD_CHECK(in.good(), ErrorCode::io, "metrics", "{}: cannot open the metrics file: {}", path, std::strerror(errno));
  std::vector<nlohmann::json> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    TD_CHECK(!j.is_discarded() && j.is_object(), ErrorCode::format, "metrics",
             "{}:{}: expected one JSON object per line (a --metrics-file), got: {:.60}", path, n, line);
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace tandem::metrics
