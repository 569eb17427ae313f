#include "tandem/cpu_binding.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "tandem/error.h"

namespace tandem {
namespace {

// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}.
std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t end = 0;
    int a = 0;
    try {
      a = std::stoi(s.substr(i), &end);
    } catch (...) {
      break;
    }
    i += end;
    int b = a;
    if (i < s.size() && s[i] == '-') {
      ++i;
      b = std::stoi(s.substr(i), &end);
      i += end;
    }
    for (int k = a; k <= b; ++k) out.push_back(k);
    while (i < s.size() && (s[i] == ',' || s[i] == '\n' || s[i] == ' ')) ++i;
  }
  return out;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

int read_int(const std::string& path, int fallback) {
  const std::string s = read_line(path);
  try {
    return s.empty() ? fallback : std::stoi(s);
  } catch (...) {
    return fallback;
  }
}

// "0-1,4" from ascending ids.
std::string list_str(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out.push_back(',');
    out += j == i ? std::to_string(ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
    i = j + 1;
  }
  return out;
}

std::mutex g_mu;
CpuBinding g_binding;

}  // namespace

BindMode parse_bind_mode(const std::string& text, const char* flag) {
  if (text == "none") return BindMode::none;
  if (text == "cores") return BindMode::cores;
  if (text == "numa") return BindMode::numa;
  throw_error(ErrorCode::invalid_argument, "bind", fmt::format("{} {}: expected none, cores or numa", flag, text));
}

std::vector<CpuInfo> read_cpu_topology(const std::string& sys) {
  std::vector<int> online = parse_list(read_line(sys + "/cpu/online"));
  if (online.empty())
    for (int i = 0; i < static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)); ++i) online.push_back(i);
  std::map<int, int> node_of;
  for (int n = 0; n < 1024; ++n) {
    const std::string list = read_line(fmt::format("{}/node/node{}/cpulist", sys, n));
    if (list.empty()) {
      if (n > 0 && read_line(fmt::format("{}/node/node{}/cpulist", sys, n + 1)).empty()) break;
      continue;
    }
    for (int c : parse_list(list)) node_of[c] = n;
  }
  std::vector<CpuInfo> out;
  std::map<std::pair<int, int>, int> core_ids;  // (package, core_id) -> a unique core number
  for (int id : online) {
    CpuInfo c;
    c.id = id;
    const std::string t = fmt::format("{}/cpu/cpu{}/topology/", sys, id);
    c.package = read_int(t + "physical_package_id", 0);
    const int core = read_int(t + "core_id", id);
    c.core = core_ids.try_emplace({c.package, core}, static_cast<int>(core_ids.size())).first->second;
    c.node = node_of.count(id) ? node_of[id] : 0;
    out.push_back(c);
  }
  return out;
}

CpuBinding plan_cpu_binding(BindMode mode, int local_rank, int local_world_size, const std::vector<CpuInfo>& topology,
                            const std::vector<int>& allowed) {
  CpuBinding b;
  b.mode = mode;
  b.local_rank = local_rank;
  b.local_world_size = std::max(1, local_world_size);
  std::set<int> nodes;
  for (const CpuInfo& c : topology) nodes.insert(c.node);
  b.nodes = std::max<int>(1, static_cast<int>(nodes.size()));
  // One CPU per physical core among the allowed ones (the lowest id: siblings left out).
  std::vector<CpuInfo> cores;
  std::set<int> seen;
  const std::set<int> ok(allowed.begin(), allowed.end());
  for (const CpuInfo& c : topology)
    if (ok.count(c.id) && seen.insert(c.core).second) cores.push_back(c);
  b.physical_cores = static_cast<int>(cores.size());
  if (mode == BindMode::none || cores.empty()) return b;
  // A launcher that confined the process already gave it its share.
  const bool confined = allowed.size() < topology.size();
  const int ranks = confined ? 1 : b.local_world_size, me = confined ? 0 : local_rank % b.local_world_size;
  if (mode == BindMode::numa) {
    std::set<int> usable;  // the nodes of the cores the process may use
    for (const CpuInfo& c : cores) usable.insert(c.node);
    const std::vector<int> ids(usable.begin(), usable.end());
    b.node = ids[static_cast<size_t>(me * static_cast<int>(ids.size()) / ranks)];
    for (const CpuInfo& c : cores)
      if (c.node == b.node) b.cpus.push_back(c.id);
  } else {
    const int n = static_cast<int>(cores.size());
    if (ranks > n) {
      b.cpus.push_back(cores[static_cast<size_t>(me % n)].id);
    } else {
      for (int i = me * n / ranks; i < (me + 1) * n / ranks; ++i) b.cpus.push_back(cores[static_cast<size_t>(i)].id);
    }
    for (const CpuInfo& c : cores)
      if (c.id == b.cpus.front()) b.node = c.node;
  }
  if (b.cpus.empty()) b.mode = BindMode::none;
  return b;
}

CpuBinding plan_cpu_binding(BindMode mode, int local_rank, int local_world_size) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> allowed;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &set)) allowed.push_back(i);
  }
  return plan_cpu_binding(mode, local_rank, local_world_size, read_cpu_topology(), allowed);
}

std::string CpuBinding::describe() const {
  if (mode == BindMode::none || cpus.empty()) return "none";
  return fmt::format("{}: CPUs {} ({} of {} physical cores, local rank {} of {}), memory node {}{}",
                     mode == BindMode::numa ? "numa" : "cores", list_str(cpus), cpus.size(), physical_cores, local_rank,
                     local_world_size, node, nodes > 1 ? "" : " (the only one)");
}

void set_cpu_binding(const CpuBinding& binding) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_binding = binding;
}

CpuBinding cpu_binding() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_binding;
}

bool bind_this_thread() {
  const CpuBinding b = cpu_binding();
  if (b.mode == BindMode::none || b.cpus.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : b.cpus) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;  // 0: the calling thread
}

void place_on_bound_node(void* p, size_t bytes) {
  const CpuBinding b = cpu_binding();
  if (b.node < 0 || b.nodes < 2 || !p || bytes == 0 || b.node >= 64) return;
  constexpr int kMpolPreferred = 1;  // <numaif.h>'s MPOL_PREFERRED, without libnuma
  const unsigned long mask = 1UL << b.node;
  (void)syscall(SYS_mbind, p, bytes, kMpolPreferred, &mask, 64UL, 0U);
}

}  // namespace tandem
