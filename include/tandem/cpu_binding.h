// Binding host threads to the cores of this rank's share of the machine, and host memory to
// its memory node (--bind, docs/distributed.md). The topology comes from sysfs
// (/sys/devices/system/cpu/cpuN/topology/{core_id,physical_package_id}, node/nodeN/cpulist);
// hyper-thread siblings are left out (one CPU per physical core, the lowest-numbered).
//   cores  local rank r of L on the machine gets cores [r * C / L, (r + 1) * C / L) of the C
//          physical cores it may use (at least one each; with more ranks than cores the ranks
//          share cores round-robin); its memory node is its first core's
//   numa   local rank r gets memory node r * N / L of the N nodes and all that node's cores
// When the launcher already confined the process to fewer CPUs than the machine's online ones
// (srun --cpu-bind, mpirun --bind-to, taskset), that set is the rank's share and is not split.
// The binding is process-wide: threads that call bind_this_thread() (the CPU optimizer's update
// threads and the data workers, at their start) take it, and the pinned pool's new segments
// are placed on its node (mbind, MPOL_PREFERRED; nothing to do on a machine of one node).
// Thread-safety: set_cpu_binding() before the threads start; the rest from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tandem {

enum class BindMode { none, cores, numa };

/// "none", "cores" or "numa" -> BindMode; throws Error(invalid_argument) naming `flag` otherwise.
BindMode parse_bind_mode(const std::string& text, const char* flag);

/// One online CPU: its id, physical core (unique over packages), package and memory node.
struct CpuInfo {
  int id = 0, core = 0, package = 0, node = 0;
};
/// The online CPUs under `sys` ("/sys/devices/system"), ascending ids; one per CPU even where
/// a file is missing (core = id, package 0, node 0).
std::vector<CpuInfo> read_cpu_topology(const std::string& sys = "/sys/devices/system");

struct CpuBinding {
  BindMode mode = BindMode::none;
  std::vector<int> cpus;   // the CPUs bound threads may run on (empty: unbound)
  int node = -1;           // the memory node of the pinned pool (-1: not placed)
  int nodes = 1;           // memory nodes on the machine
  int physical_cores = 0;  // physical cores the process may use
  int local_rank = 0, local_world_size = 1;
  /// "cores: CPUs 2-3 (2 of 4 physical cores, local rank 1 of 2), memory node 0" or "none".
  std::string describe() const;
};

/// The binding of local rank `local_rank` of `local_world_size` (>= 1) under `mode`, from
/// `topology` and the CPUs this process may use (`allowed`, ascending).
CpuBinding plan_cpu_binding(BindMode mode, int local_rank, int local_world_size,
                            const std::vector<CpuInfo>& topology, const std::vector<int>& allowed);
/// The same from this machine's sysfs and sched_getaffinity.
CpuBinding plan_cpu_binding(BindMode mode, int local_rank, int local_world_size);

/// Sets the process-wide binding (BindMode::none: threads started later are not bound).
void set_cpu_binding(const CpuBinding& binding);
/// The process-wide binding.
CpuBinding cpu_binding();
/// Binds the calling thread to cpu_binding().cpus; false when unbound or refused.
bool bind_this_thread();
/// Places the pages of [p, p + bytes) (page-aligned) on cpu_binding().node before they are
/// touched; no-op without a node or on a machine of one node. Best effort (never throws).
void place_on_bound_node(void* p, size_t bytes);

}  // namespace tandem
