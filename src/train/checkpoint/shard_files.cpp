#include "train/checkpoint/shard_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "tandem/atomic_file.h"
#include "tandem/error.h"

namespace tandem::train::checkpoint {

using json = nlohmann::json;
static const char* kOp = "checkpoint";
static const char* kFormat = "tandem-sharded-checkpoint";

[[noreturn]] static void bad(const std::string& path, const std::string& check) {
  throw_error(ErrorCode::format, kOp, fmt::format("{}: {}", path, check));
}

std::string shard_file_name(int rank, int world) { return fmt::format("rank-{}-of-{}.safetensors", rank, world); }

static bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

static std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(ErrorCode::io, kOp, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

static void write_text(const std::string& path, const std::string& text) {
  AtomicFile out(path, kOp);
  out.write(text.data(), text.size());
  out.commit();
}

static void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    if (DIR* d = ::opendir(path.c_str())) {
      std::vector<std::string> names;
      while (const dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
      ::closedir(d);
      for (const std::string& n : names) remove_tree(path + "/" + n);
    }
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

json read_shard_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(ErrorCode::io, kOp, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = len << 8 | len_bytes[i];
  if (!in || len > (uint64_t{100} << 20)) bad(path, "not a safetensors file");
  std::string text(len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(len));
  if (!in) bad(path, "truncated header");
  try {
    return json::parse(text);
  } catch (const std::exception& e) {
    bad(path, std::string("header is not valid JSON: ") + e.what());
  }
}

// Adds the pieces of shard `r` (its header at `path`) to the manifest's tensors.
static void add_pieces(json& tensors, int r, const std::string& path) {
  const json h = read_shard_header(path);
  json state;
  try {
    state = json::parse(h.at("__metadata__").at("state").get<std::string>());
  } catch (const std::exception& e) {
    bad(path, std::string("no shard state in its metadata: ") + e.what());
  }
  for (const auto& [key, p] : state.at("pieces").items()) {
    const json& entry = h.at(key);
    const auto& offs = entry.at("data_offsets");
    const DType dt = dtype_from_safetensors_name(entry.at("dtype").get<std::string>());
    const int64_t n = static_cast<int64_t>((offs[1].get<uint64_t>() - offs[0].get<uint64_t>()) / dtype_size(dt));
    const std::string name = p.at("name").get<std::string>();
    json& t = tensors[name];
    if (t.is_null()) t = {{"dtype", entry.at("dtype")}, {"shape", p.at("shape")}, {"pieces", json::array()}};
    if (t["dtype"] != entry.at("dtype") || t["shape"] != p.at("shape"))
      bad(path, fmt::format("tensor '{}' has another dtype or shape than in the other shards", name));
    const int64_t b = p.at("begin").get<int64_t>();
    t["pieces"].push_back({{"shard", r}, {"key", key}, {"begin", b}, {"end", b + n}});
  }
}

// Every tensor's pieces lie within it and cover each of its elements.
static void check_cover(const json& tensors, const std::string& path) {
  for (const auto& [name, t] : tensors.items()) {
    const Shape shape = t.at("shape").get<Shape>();
    const int64_t numel = shape_numel(shape);
    std::vector<std::pair<int64_t, int64_t>> r;
    for (const json& p : t.at("pieces")) r.emplace_back(p.at("begin").get<int64_t>(), p.at("end").get<int64_t>());
    std::sort(r.begin(), r.end());
    int64_t covered = 0;
    for (const auto& [b, e] : r) {
      if (b < 0 || e > numel || b > e) bad(path, fmt::format("tensor '{}': a piece [{}, {}) lies outside its {} elements", name, b, e, numel));
      if (b > covered) break;
      covered = std::max(covered, e);
    }
    if (covered < numel)
      bad(path, fmt::format("tensor '{}': elements from {} of {} are in no shard", name, covered, numel));
  }
}

// Rank 0: waits until every shard of the temporary folder is there, or one failed.
static void wait_for_shards(const std::string& tmp, int world, double timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    std::string missing;
    for (int r = 0; r < world; ++r) {
      if (exists(fmt::format("{}/rank-{}.failed", tmp, r)))
        throw_error(ErrorCode::io, kOp,
                    fmt::format("{}: rank {} could not write its shard: {}", tmp, r,
                                read_text(fmt::format("{}/rank-{}.failed", tmp, r))));
      if (!exists(tmp + "/" + shard_file_name(r, world))) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    if (missing.empty()) return;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s)
      throw_error(ErrorCode::distributed, kOp,
                  fmt::format("{}: the shards of rank {} did not come within {} s (--dist-timeout)", tmp, missing,
                              timeout_s));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void write_shard(const std::string& dir, const std::string& name, int rank, int world, const json& state,
                 const json& pieces, const NamedTensors& tensors, double timeout_s) {
  const std::string tmp = dir + "/" + name + ".tmp", final_path = dir + "/" + name;
  if (::mkdir(tmp.c_str(), 0755) != 0 && errno != EEXIST)
    throw_error(ErrorCode::io, kOp, fmt::format("{}: cannot create the folder: {}", tmp, std::strerror(errno)));
  const json shard_state = {{"rank", rank},
                            {"world_size", world},
                            {"global_step", state.value("global_step", 0)},
                            {"pieces", pieces}};
  try {
    write_checkpoint_file(tmp + "/" + shard_file_name(rank, world), shard_state, tensors);
  } catch (const Error& e) {
    try {
      write_text(fmt::format("{}/rank-{}.failed", tmp, rank), e.what());
    } catch (...) {
    }
    throw;
  }
  if (rank != 0) return;
  wait_for_shards(tmp, world, timeout_s);
  json tensor_table = json::object();
  json shards = json::array();
  for (int r = 0; r < world; ++r) {
    shards.push_back(shard_file_name(r, world));
    add_pieces(tensor_table, r, tmp + "/" + shard_file_name(r, world));
  }
  check_cover(tensor_table, tmp);
  const json manifest = {{"format", kFormat},           {"format_version", kFormatVersion}, {"world_size", world},
                         {"state", state},              {"shards", shards},                 {"tensors", tensor_table}};
  write_text(tmp + "/" + kShardManifest, manifest.dump(1) + "\n");
  fsync_dir(tmp);
  // The same step written again (a resumed run's first checkpoint): swap, then drop the old one.
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno != EEXIST || ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) != 0)
      throw_error(ErrorCode::io, kOp, fmt::format("{}: cannot rename to {}: {}", tmp, final_path, std::strerror(errno)));
    remove_tree(tmp);
  }
  fsync_dir(dir);
}

bool is_sharded_checkpoint(const std::string& path) { return exists(path + "/" + kShardManifest); }

json read_shard_manifest(const std::string& path) {
  const std::string file = path + "/" + kShardManifest;
  json m;
  try {
    m = json::parse(read_text(file));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    bad(file, std::string("not valid JSON: ") + e.what());
  }
  if (!m.is_object() || m.value("format", "") != kFormat)
    bad(file, fmt::format("not a sharded tandem checkpoint: expected \"format\": \"{}\"", kFormat));
  if (m.value("format_version", 0) != kFormatVersion)
    bad(file, fmt::format("format version {} is not the version {} this tandem reads", m.value("format_version", 0),
                          kFormatVersion));
  try {
    if (!m.at("state").is_object() || !m.at("shards").is_array() || !m.at("tensors").is_object())
      bad(file, "expected \"state\", \"shards\" and \"tensors\"");
    for (const auto& [name, t] : m["tensors"].items()) {
      (void)dtype_from_safetensors_name(t.at("dtype").get<std::string>());
      for (const json& p : t.at("pieces"))
        if (p.at("shard").get<size_t>() >= m["shards"].size())
          bad(file, fmt::format("tensor '{}' names shard {} of {}", name, p["shard"].get<size_t>(), m["shards"].size()));
    }
    check_cover(m["tensors"], file);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    bad(file, std::string("malformed: ") + e.what());
  }
  return m;
}

CheckpointFile read_sharded_checkpoint(const std::string& path) {
  const json m = read_shard_manifest(path);
  CheckpointFile out;
  out.state = m["state"];
  std::map<std::string, size_t> index;
  std::map<std::pair<size_t, std::string>, std::pair<size_t, int64_t>> where;  // (shard, key) -> (tensor, begin)
  for (const auto& [name, t] : m["tensors"].items()) {
    index[name] = out.tensors.size();
    out.tensors.emplace_back(name, Tensor::empty(t["shape"].get<Shape>(),
                                                 dtype_from_safetensors_name(t["dtype"].get<std::string>())));
    for (const json& p : t["pieces"])
      where[{p["shard"].get<size_t>(), p["key"].get<std::string>()}] = {index[name], p["begin"].get<int64_t>()};
  }
  size_t found = 0;
  for (size_t s = 0; s < m["shards"].size(); ++s) {
    const CheckpointFile shard = read_checkpoint_file(path + "/" + m["shards"][s].get<std::string>());
    for (const auto& [key, t] : shard.tensors) {
      const auto it = where.find({s, key});
      if (it == where.end()) continue;
      Tensor& dst = out.tensors[it->second.first].second;
      const size_t el = dtype_size(dst.dtype());
      if (t.dtype() != dst.dtype() || it->second.second + t.numel() > dst.numel())
        bad(path, fmt::format("shard {}: piece '{}' does not fit its tensor", s, key));
      std::memcpy(static_cast<char*>(dst.raw_data()) + static_cast<size_t>(it->second.second) * el, t.raw_data(),
                  t.nbytes());
      ++found;
    }
  }
  if (found != where.size())
    bad(path, fmt::format("the shards hold {} of the {} pieces the manifest names", found, where.size()));
  return out;
}

}  // namespace tandem::train::checkpoint
