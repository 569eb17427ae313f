#include "train/checkpoint/checkpoint_file.h"

#include <zlib.h>

#include <map>
#include <string>

#include <fmt/format.h>

#include "tandem/error.h"

namespace tandem::train::checkpoint {

using json = nlohmann::json;
static const char* kOp = "checkpoint";

uint32_t tensor_crc32(const Tensor& t) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(t.raw_data());
  size_t left = t.nbytes();
  while (left > 0) {  // zlib takes 32-bit lengths
    const auto n = static_cast<uInt>(std::min<size_t>(left, size_t{1} << 30));
    crc = crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

void write_checkpoint_file(const std::string& path, const json& state, const NamedTensors& tensors) {
  json crcs = json::object();
  for (const auto& [name, t] : tensors) crcs[name] = std::to_string(tensor_crc32(t));
  const std::map<std::string, std::string> meta = {{"format", "tandem-checkpoint"},
                                                   {"format_version", std::to_string(kFormatVersion)},
                                                   {"state", state.dump()},
                                                   {"crc32", crcs.dump()}};
  try {
    save_safetensors(path, tensors, meta);
  } catch (const Error& e) {
    std::string what = e.what();
    if (!what.empty() && what[0] == '[') what.erase(0, what.find("] ") + 2);
    throw_error(e.code(), kOp, what);
  }
}

[[noreturn]] static void bad(const std::string& path, const std::string& check) {
  throw_error(ErrorCode::format, kOp, fmt::format("{}: {}", path, check));
}

CheckpointFile read_checkpoint_file(const std::string& path) {
  std::map<std::string, std::string> meta;
  CheckpointFile out;
  try {
    out.tensors = load_safetensors(path, &meta);
  } catch (const Error& e) {
    std::string what = e.what();
    if (!what.empty() && what[0] == '[') what.erase(0, what.find("] ") + 2);  // keeps "<path>: <check>"
    throw_error(e.code(), kOp, what);
  }
  if (meta["format"] != "tandem-checkpoint")
    bad(path, fmt::format("not a tandem checkpoint: its metadata records format '{}', expected 'tandem-checkpoint'",
                          meta["format"].substr(0, 64)));
  if (meta["format_version"] != std::to_string(kFormatVersion))
    bad(path, fmt::format("format version '{}' is not the version {} this tandem reads",
                          meta["format_version"].substr(0, 16), kFormatVersion));
  json crcs;
  try {
    crcs = json::parse(meta["crc32"]);
    out.state = json::parse(meta["state"]);
  } catch (const std::exception& e) {
    bad(path, std::string("the checksum list or the state is not valid JSON: ") + e.what());
  }
  if (!crcs.is_object() || !out.state.is_object()) bad(path, "the checksum list or the state is not a JSON object");
  if (crcs.size() != out.tensors.size())
    bad(path, fmt::format("holds {} tensors but {} checksums", out.tensors.size(), crcs.size()));
  for (const auto& [name, t] : out.tensors) {
    const auto it = crcs.find(name);
    if (it == crcs.end() || !it->is_string()) bad(path, fmt::format("tensor '{}' has no CRC-32", name));
    const std::string want = it->get<std::string>(), got = std::to_string(tensor_crc32(t));
    if (want != got)
      bad(path, fmt::format("tensor '{}' fails its CRC-32 check (recorded {}, computed {}): the file is corrupt",
                            name, want.substr(0, 16), got));
  }
  return out;
}

}  // namespace tandem::train::checkpoint
