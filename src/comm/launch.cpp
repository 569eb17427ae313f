// The launcher's environment: which launcher started this process, its rank, local rank and
// world size, and where the ranks meet (tandem/comm/communicator.h, launch_info()). Open MPI,
// PMI, torchrun and Slurm each set their own variables; the first present in that order wins,
// and a later one describing a world of the same size must agree with it.
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "comm/comm_util.h"

namespace tandem::comm {

namespace {

// One launcher's reading of the environment.
struct Source {
  std::string launcher, rendezvous;
  int rank = -1, size = -1, local = -1, local_size = -1, node = -1;
  std::string rank_var, size_var, local_var;  // the variables the values came from
};

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// The decimal integer >= 0 in `name`, -1 when unset; Error(invalid_argument) for another value.
int env_int(const char* name) {
  const char* v = env(name);
  if (!v) return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  TD_CHECK_ARG(*end == '\0' && x >= 0 && x < (1L << 30), kOp,
               "launch: {}='{}': expected an integer >= 0 (the launcher's environment)", name, v);
  return static_cast<int>(x);
}

int env_int(const std::string& name) { return env_int(name.c_str()); }

// The first of `names` that is set: its value and name.
int first_int(std::initializer_list<const char*> names, std::string* which = nullptr) {
  for (const char* n : names)
    if (env(n)) {
      if (which) *which = n;
      return env_int(n);
    }
  return -1;
}

// Slurm's "2(x3),1" (tasks on each node, in node order): the count on node `node`.
int tasks_on_node(const char* list, int node) {
  if (!list || node < 0) return -1;
  int at = 0;
  for (const char* p = list; *p;) {
    char* end = nullptr;
    const long n = std::strtol(p, &end, 10);
    long repeat = 1;
    if (end == p) return -1;
    p = end;
    if (*p == '(' && p[1] == 'x') {
      repeat = std::strtol(p + 2, &end, 10);
      p = *end == ')' ? end + 1 : end;
    }
    if (node < at + repeat) return static_cast<int>(n);
    at += static_cast<int>(repeat);
    if (*p == ',') ++p;
  }
  return -1;
}

// The launchers that name their variables alike, in order: present when the rank and size are set.
struct Vars {
  const char *launcher, *rendezvous, *rank, *size, *local, *local_size, *node;
};
constexpr Vars kLaunchers[] = {
    {"mpirun", "mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK"},
    {"pmi", "mpi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", nullptr},
    {"torchrun", "tcp", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"}};

std::vector<Source> sources() {
  std::vector<Source> out;
  for (const Vars& v : kLaunchers) {
    if (!env(v.rank) || !env(v.size)) continue;
    Source s;
    s.launcher = v.launcher, s.rendezvous = v.rendezvous;
    s.rank = env_int(s.rank_var = v.rank);
    s.size = env_int(s.size_var = v.size);
    s.local = env_int(s.local_var = v.local);
    s.local_size = env_int(v.local_size);
    s.node = v.node ? env_int(v.node) : -1;
    out.push_back(s);
  }
  // A task of an srun step; the batch script itself (no step id) runs one process.
  if (env("SLURM_PROCID") && (env("SLURM_STEP_ID") || env("SLURM_STEPID"))) {
    Source s;
    s.launcher = "slurm", s.rendezvous = env("PMIX_RANK") ? "mpi" : "tcp";
    s.rank = env_int(s.rank_var = "SLURM_PROCID");
    s.size = first_int({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"}, &s.size_var);
    s.local = env_int(s.local_var = "SLURM_LOCALID");
    s.node = env_int("SLURM_NODEID");
    s.local_size = tasks_on_node(env("SLURM_STEP_TASKS_PER_NODE") ? env("SLURM_STEP_TASKS_PER_NODE")
                                                                    : env("SLURM_TASKS_PER_NODE"),
                                 s.node < 0 ? 0 : s.node);
    out.push_back(s);
  }
  return out;
}

void check_source(const Source& s) {
  TD_CHECK_ARG(s.size >= 1, kOp, "launch: {}={} but {}: expected the world size beside the rank ({})", s.rank_var,
               s.rank, s.size_var.empty() ? "no task count (SLURM_NTASKS)" : s.size_var + " is unset", s.launcher);
  TD_CHECK_ARG(s.rank < s.size, kOp, "launch: {}={} is outside the world of {}={} ({})", s.rank_var, s.rank,
               s.size_var, s.size, s.launcher);
}

// The tcp rendezvous: MASTER_ADDR and MASTER_PORT, with Slurm's defaults.
void tcp_rendezvous(LaunchInfo& info) {
  const char* addr = env("MASTER_ADDR");
  int port = env_int("MASTER_PORT");
  const bool slurm = info.launcher == "slurm";
  if (!addr && slurm) {
    const int nodes = first_int({"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
    TD_CHECK_ARG(nodes <= 1, kOp,
                 "launch: a Slurm step over {} nodes without MASTER_ADDR: expected rank 0's host in MASTER_ADDR "
                 "(e.g. export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1))",
                 nodes);
    addr = "127.0.0.1";
  }
  if (port < 0 && slurm) {
    const int job = first_int({"SLURM_JOB_ID", "SLURM_JOBID"});
    port = 20000 + (job < 0 ? 0 : job % 10000);
  }
  TD_CHECK_ARG(addr, kOp, "launch: {} set RANK and WORLD_SIZE but not MASTER_ADDR: expected rank 0's host there",
               info.launcher);
  TD_CHECK_ARG(port > 0 && port < 65536, kOp, "launch: MASTER_PORT={}: expected a port in [1, 65535]",
               env("MASTER_PORT") ? env("MASTER_PORT") : "(unset)");
  info.master_addr = addr;
  info.master_port = port;
}

}  // namespace

LaunchInfo launch_info() {
  const std::vector<Source> found = sources();
  LaunchInfo info;
  if (found.empty()) return info;
  const Source& s = found.front();
  check_source(s);
  for (size_t i = 1; i < found.size(); ++i) {
    const Source& o = found[i];
    if (o.size != s.size) continue;  // an enclosing launcher (torchrun or mpirun inside srun)
    const bool rank_differs = o.rank != s.rank;
    if (!rank_differs && (o.local < 0 || s.local < 0 || o.local == s.local)) continue;
    const std::string& a = rank_differs ? s.rank_var : s.local_var;
    const std::string& b = rank_differs ? o.rank_var : o.local_var;
    throw_error(ErrorCode::invalid_argument, kOp,
                fmt::format("launch: {}={} ({}) but {}={} ({}) in a world of {}: two launchers disagree on this "
                            "process's {}; expected the variables of one launcher (unset the other's)",
                            a, rank_differs ? s.rank : s.local, s.launcher, b, rank_differs ? o.rank : o.local,
                            o.launcher, s.size, rank_differs ? "rank" : "local rank"));
  }
  info.rank = s.rank;
  info.world_size = s.size;
  info.local_rank = s.local < 0 ? 0 : s.local;
  info.local_world_size = s.local_size < 1 ? 1 : s.local_size;
  info.node_rank = s.node < 0 ? 0 : s.node;
  info.launcher = s.launcher;
  info.rendezvous = s.rendezvous;
  if (info.rendezvous == "tcp") tcp_rendezvous(info);
  return info;
}

CommunicatorPtr launched_world(double timeout_seconds) {
  const LaunchInfo info = launch_info();
  TD_CHECK_ARG(info.world_size > 1, kOp,
               "launch: this process was started as one rank ({}): expected mpirun, srun or torchrun of several",
               info.launcher);
  if (info.rendezvous == "mpi") {
    CommunicatorPtr w = mpi_world();
    w->set_timeout_seconds(timeout_seconds);
    return w;
  }
  return tcp_world(timeout_seconds);
}

}  // namespace tandem::comm
