#include "train/checkpoint/checkpoint_dir.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tandem/atomic_file.h"
#include "tandem/error.h"
#include "train/checkpoint/shard_files.h"

namespace tandem::train::checkpoint {

using json = nlohmann::json;
static const char* kOp = "checkpoint";
static const char* kPrefix = "step-";
static const char* kSuffix = ".safetensors";

std::string checkpoint_file_name(int64_t global_step) { return fmt::format("{}{:010}{}", kPrefix, global_step, kSuffix); }
std::string sharded_checkpoint_name(int64_t global_step) {
  return fmt::format("{}{:010}{}", kPrefix, global_step, kShardSuffix);
}

static std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw_error(ErrorCode::io, kOp, fmt::format("{}: cannot read the folder: {}", dir, std::strerror(errno)));
  while (const dirent* e = ::readdir(d)) out.emplace_back(e->d_name);
  ::closedir(d);
  return out;
}

// The global step a checkpoint file name (or sharded checkpoint folder name) holds, or -1 for
// other names.
static int64_t step_of(const std::string& name) {
  const size_t p = std::strlen(kPrefix);
  const size_t s = name.size() == p + 10 + std::strlen(kShardSuffix) ? std::strlen(kShardSuffix) : std::strlen(kSuffix);
  const char* suffix = s == std::strlen(kSuffix) ? kSuffix : kShardSuffix;
  if (name.size() != p + 10 + s || name.rfind(kPrefix, 0) != 0 || name.compare(p + 10, s, suffix) != 0) return -1;
  int64_t v = 0;
  for (size_t i = p; i < p + 10; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

void prepare_checkpoint_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw_error(ErrorCode::io, kOp, fmt::format("{}: cannot create the folder: {}", dir, std::strerror(errno)));
  for (const std::string& name : entries(dir)) {
    // A sharded checkpoint's folder that was never completed (its ranks are gone: this run
    // writes its own).
    const std::string tmp = std::string(kShardSuffix) + ".tmp";
    if (name.size() > tmp.size() && name.compare(name.size() - tmp.size(), tmp.size(), tmp) == 0) {
      remove_tree(dir + "/" + name);
      continue;
    }
    const size_t t = name.rfind(".tmp-");
    if (t == std::string::npos) continue;
    const char* b = name.data() + t + 5;
    const char* e = name.data() + name.size();
    pid_t pid = 0;
    // Only a process id as the writers name it (1 .. pid_t's maximum, decimal digits): another
    // name ("x.tmp-99999999999999999999", "x.tmp-0") is no temporary file of ours and stays.
    const auto [ptr, ec] = std::from_chars(b, e, pid);
    if (b == e || *b < '0' || *b > '9' || ec != std::errc() || ptr != e || pid <= 0) continue;
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive
    ::unlink((dir + "/" + name).c_str());
  }
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const std::string& name : entries(dir))
    if (const int64_t s = step_of(name); s >= 0) found.emplace_back(s, name);
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (const auto& f : found) out.push_back(f.second);
  return out;
}

void publish_checkpoint(const std::string& dir, const std::string& file_name, const json& state, int keep) {
  const json manifest = {{"format_version", kFormatVersion},
                         {"checkpoint", file_name},
                         {"epoch", state.value("epoch", 0)},
                         {"step", state.value("step", 0)},
                         {"global_step", state.value("global_step", 0)}};
  const std::string text = manifest.dump(1) + "\n";
  {
    AtomicFile out(dir + "/" + kManifestName, kOp);
    out.write(text.data(), text.size());
    out.commit();
  }
  const std::vector<std::string> all = list_checkpoints(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i)
    if (all[i] != file_name) remove_tree(dir + "/" + all[i]);
}

// The checkpoint file the manifest of `dir` names; throws Error(format) naming the manifest.
static std::string manifest_target(const std::string& dir) {
  const std::string path = dir + "/" + kManifestName;
  std::ifstream in(path);
  if (!in) throw_error(ErrorCode::io, kOp, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  json m;
  try {
    m = json::parse(ss.str());
  } catch (const std::exception& e) {
    throw_error(ErrorCode::format, kOp, fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  if (!m.is_object() || !m.contains("checkpoint") || !m["checkpoint"].is_string() ||
      step_of(m["checkpoint"].get<std::string>()) < 0)
    throw_error(ErrorCode::format, kOp, fmt::format("{}: expected {{\"checkpoint\": \"step-<N>.safetensors\" or \"step-<N>.shards\"}}", path));
  return dir + "/" + m["checkpoint"].get<std::string>();
}

CheckpointFile read_any_checkpoint(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return read_sharded_checkpoint(path);
  return read_checkpoint_file(path);
}

static std::string one_line(const Error& e) {
  std::string w = e.what();
  if (!w.empty() && w[0] == '[') w.erase(0, w.find("] ") + 2);
  return w;
}

Located locate_checkpoint(const std::string& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0)
    throw_error(ErrorCode::io, kOp, fmt::format("{}: cannot open: {}", target, std::strerror(errno)));
  Located loc;
  if (!S_ISDIR(st.st_mode) || is_sharded_checkpoint(target)) {
    loc.file = read_any_checkpoint(target);
    loc.path = target;
    return loc;
  }
  std::vector<std::string> tried, failures;
  auto attempt = [&](const std::string& path) {
    if (std::find(tried.begin(), tried.end(), path) != tried.end()) return false;
    tried.push_back(path);
    try {
      loc.file = read_any_checkpoint(path);
      loc.path = path;
      return true;
    } catch (const Error& e) {
      failures.push_back(one_line(e));
      return false;
    }
  };
  bool ok = false;
  try {
    ok = attempt(manifest_target(target));
  } catch (const Error& e) {
    failures.push_back(one_line(e));
  }
  for (const std::string& name : list_checkpoints(target)) {
    if (ok) break;
    ok = attempt(target + "/" + name);
  }
  std::string list;
  for (const std::string& f : failures) list += (list.empty() ? "" : "; ") + f;
  if (!ok)
    throw_error(ErrorCode::format, kOp,
                fmt::format("{}: no checkpoint verifies{}", target,
                            failures.empty() ? ": the folder holds none" : ": " + list));
  if (!failures.empty()) loc.fallback = fmt::format("passed over: {}; resuming from {}", list, loc.path);
  return loc;
}

}  // namespace tandem::train::checkpoint
