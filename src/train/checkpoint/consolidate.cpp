#include "train/checkpoint/consolidate.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tandem/error.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/shard_files.h"

namespace tandem::train::checkpoint {

using json = nlohmann::json;
static const char* kOp = "checkpoint";

// The sharded checkpoint `source` names: itself, or the newest complete one of a folder.
static std::string sharded_source(const std::string& source) {
  if (is_sharded_checkpoint(source)) return source;
  struct stat st {};
  if (::stat(source.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::ifstream in(source + "/" + kManifestName);
    json m;
    if (in) try {
        in >> m;
        const std::string named = source + "/" + m.at("checkpoint").get<std::string>();
        if (is_sharded_checkpoint(named)) return named;
      } catch (const std::exception&) {
      }
    for (const std::string& name : list_checkpoints(source))
      if (is_sharded_checkpoint(source + "/" + name)) return source + "/" + name;
  }
  throw_error(ErrorCode::format, kOp,
              fmt::format("{}: not a sharded checkpoint (a step-<N>.shards folder with a manifest.json) nor a "
                          "checkpoint folder that holds one",
                          source));
}

namespace {
// An output file written at offsets, renamed into place by commit().
class OutFile {
 public:
  explicit OutFile(const std::string& path) : path_(path), tmp_(fmt::format("{}.tmp-{}", path, ::getpid())) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd_ < 0) fail("cannot create");
  }
  ~OutFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!done_) ::unlink(tmp_.c_str());
  }
  void write_at(uint64_t offset, const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("cannot write");
      p += w;
      offset += static_cast<uint64_t>(w);
      n -= static_cast<size_t>(w);
    }
  }
  void commit() {
    if (::fsync(fd_) != 0) fail("cannot sync");
    ::close(fd_);
    fd_ = -1;
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("cannot rename into place");
    done_ = true;
  }

 private:
  [[noreturn]] void fail(const char* what) {
    throw_error(ErrorCode::io, kOp, fmt::format("{}: {}: {}", path_, what, std::strerror(errno)));
  }
  std::string path_, tmp_;
  int fd_ = -1;
  bool done_ = false;
};
}  // namespace

ConsolidateReport consolidate_checkpoint(const std::string& source, const std::string& out_path, bool with_state) {
  ConsolidateReport rep;
  rep.source = sharded_source(source);
  const json m = read_shard_manifest(rep.source);
  const json weights = m["state"].value("weights", json::object());
  // The output's tensors: a state tensor's name in it, and the names it is written under.
  std::map<std::string, std::vector<std::string>> names;
  for (const auto& [name, t] : m["tensors"].items()) {
    if (name.rfind("model.", 0) == 0) {
      names[name].push_back(name.substr(6));
    } else if (with_state) {
      names[name].push_back(name);
    }
  }
  for (const json& tie : weights.value("tied", json::array())) {
    const std::string src = "model." + tie[1].get<std::string>();
    if (names.count(src)) names[src].push_back(tie[0].get<std::string>());
  }
  json header = json::object();
  std::map<std::string, uint64_t> offset;  // output name -> its first byte in the data section
  uint64_t at = 0;
  for (const auto& [name, outs] : names) {
    const json& t = m["tensors"][name];
    const uint64_t bytes = static_cast<uint64_t>(shape_numel(t["shape"].get<Shape>())) *
                           dtype_size(dtype_from_safetensors_name(t["dtype"].get<std::string>()));
    for (const std::string& o : outs) {
      header[o] = {{"dtype", t["dtype"]}, {"shape", t["shape"]}, {"data_offsets", {at, at + bytes}}};
      offset[o] = at;
      at += bytes;
      ++rep.tensors;
    }
  }
  std::map<std::string, std::string> meta = {{"format", "pt"}};
  if (weights.contains("model")) meta["model"] = weights["model"].get<std::string>();
  const json config = weights.value("metadata", json::object());
  for (const auto& [k, v] : config.items()) meta[k] = v.get<std::string>();
  header["__metadata__"] = meta;
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');
  const uint64_t data_start = 8 + text.size();
  OutFile out(out_path);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.write_at(0, len, 8);
  out.write_at(8, text.data(), text.size());
  if (at > 0) out.write_at(data_start + at - 1, "", 1);  // the file's full size (tensors of zeros stay zeros)
  // One shard in memory at a time: each piece goes to the places of its tensor's names.
  std::map<std::pair<size_t, std::string>, std::pair<std::string, int64_t>> where;  // (shard, key) -> (name, begin)
  for (const auto& [name, outs] : names)
    for (const json& p : m["tensors"][name]["pieces"])
      where[{p["shard"].get<size_t>(), p["key"].get<std::string>()}] = {name, p["begin"].get<int64_t>()};
  // One piece in memory at a time: read from its shard, checked against its CRC-32, written
  // at the places of its tensor's names.
  size_t found = 0;
  std::vector<char> buf;
  for (size_t s = 0; s < m["shards"].size(); ++s) {
    const std::string path = rep.source + "/" + m["shards"][s].get<std::string>();
    const json h = read_shard_header(path);
    json crcs;
    try {
      crcs = json::parse(h.at("__metadata__").at("crc32").get<std::string>());
    } catch (const std::exception& e) {
      throw_error(ErrorCode::format, kOp, fmt::format("{}: no CRC-32 list in its metadata: {}", path, e.what()));
    }
    std::ifstream in(path, std::ios::binary);  // the data start after the 8-byte length and the header
    unsigned char lb[8];
    in.read(reinterpret_cast<char*>(lb), 8);
    uint64_t base = 0;
    for (int i = 7; i >= 0; --i) base = base << 8 | lb[i];
    base += 8;
    for (const auto& [key, entry] : h.items()) {
      const auto it = where.find({s, key});
      if (key == "__metadata__" || it == where.end()) continue;
      const uint64_t b = entry.at("data_offsets")[0].get<uint64_t>(), e = entry.at("data_offsets")[1].get<uint64_t>();
      buf.resize(e - b);
      in.seekg(static_cast<std::streamoff>(base + b));
      in.read(buf.data(), static_cast<std::streamsize>(e - b));
      if (!in) throw_error(ErrorCode::io, kOp, fmt::format("{}: read error in '{}'", path, key));
      Tensor view = Tensor::from_blob(buf.data(), {static_cast<int64_t>(e - b)}, DType::u8);
      if (std::to_string(tensor_crc32(view)) != crcs.value(key, ""))
        throw_error(ErrorCode::format, kOp, fmt::format("{}: tensor '{}' fails its CRC-32 check: the file is corrupt", path, key));
      ++found;
      const DType dt = dtype_from_safetensors_name(entry.at("dtype").get<std::string>());
      const uint64_t skip = static_cast<uint64_t>(it->second.second) * dtype_size(dt);
      for (const std::string& o : names[it->second.first]) out.write_at(data_start + offset[o] + skip, buf.data(), buf.size());
    }
    ++rep.shards;
  }
  if (found != where.size())
    throw_error(ErrorCode::format, kOp,
                fmt::format("{}: the shards hold {} of the {} pieces the manifest names", rep.source, found,
                            where.size()));
  out.commit();
  rep.bytes = static_cast<int64_t>(data_start + at);
  return rep;
}

}  // namespace tandem::train::checkpoint
