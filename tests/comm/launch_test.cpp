// launch_info(): rank, local rank, world size and rendezvous from the variables Open MPI,
// torchrun and Slurm's srun set, in the documented order, and one line naming both variables
// when two launchers of one world disagree.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "tandem/comm/communicator.h"
#include "tandem/error.h"

namespace tandem::comm {
namespace {

// Sets exactly `vars` among the launchers' variables for its lifetime, then restores them.
class Env {
 public:
  explicit Env(const std::map<std::string, std::string>& vars) {
    for (const char* n : kNames) {
      if (const char* v = std::getenv(n)) saved_[n] = v;
      ::unsetenv(n);
    }
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~Env() {
    for (const char* n : kNames) ::unsetenv(n);
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  static constexpr const char* kNames[] = {
      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
      "OMPI_COMM_WORLD_NODE_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMIX_RANK", "RANK",
      "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
      "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_STEP_ID",
      "SLURM_STEPID", "SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_NODES", "SLURM_NNODES",
      "SLURM_JOB_NUM_NODES", "SLURM_JOB_ID", "SLURM_JOBID"};
  std::map<std::string, std::string> saved_;
};

std::string error_of(const std::map<std::string, std::string>& vars) {
  Env env(vars);
  try {
    launch_info();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

TEST(Launch, NoLauncherIsOneProcess) {
  Env env({});
  const LaunchInfo i = launch_info();
  EXPECT_EQ(i.rank, 0);
  EXPECT_EQ(i.world_size, 1);
  EXPECT_EQ(i.launcher, "none");
}

TEST(Launch, TorchrunsVariablesMeetOverTcp) {
  Env env({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", "1"},
           {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
  const LaunchInfo i = launch_info();
  EXPECT_EQ(i.rank, 2);
  EXPECT_EQ(i.world_size, 4);
  EXPECT_EQ(i.local_rank, 0);
  EXPECT_EQ(i.local_world_size, 2);
  EXPECT_EQ(i.node_rank, 1);
  EXPECT_EQ(i.launcher, "torchrun");
  EXPECT_EQ(i.rendezvous, "tcp");
  EXPECT_EQ(i.master_addr, "10.0.0.1");
  EXPECT_EQ(i.master_port, 29500);
}

TEST(Launch, SrunsVariablesWithTheirDefaults) {
  Env env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_LOCALID", "1"},
           {"SLURM_NODEID", "1"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "1,2(x2)"},
           {"SLURM_STEP_NUM_NODES", "1"}, {"SLURM_JOB_ID", "123456"}});
  const LaunchInfo i = launch_info();
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.world_size, 4);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.local_world_size, 2);  // node 1 of "1,2(x2)"
  EXPECT_EQ(i.launcher, "slurm");
  EXPECT_EQ(i.rendezvous, "tcp");
  EXPECT_EQ(i.master_addr, "127.0.0.1");
  EXPECT_EQ(i.master_port, 20000 + 123456 % 10000);
  ::setenv("PMIX_RANK", "3", 1);  // srun --mpi=pmix: MPI meets through PMIx
  EXPECT_EQ(launch_info().rendezvous, "mpi");
}

TEST(Launch, ABatchScriptWithoutAStepIsOneProcess) {
  Env env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(launch_info().world_size, 1);
}

TEST(Launch, MpirunComesFirstAndAnEnclosingStepOfAnotherSizeIsIgnored) {
  Env env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
           {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_STEP_ID", "0"}, {"SLURM_LOCALID", "0"}});
  const LaunchInfo i = launch_info();
  EXPECT_EQ(i.rank, 1);
  EXPECT_EQ(i.world_size, 4);
  EXPECT_EQ(i.launcher, "mpirun");
  EXPECT_EQ(i.rendezvous, "mpi");
}

TEST(Launch, LaunchersThatDisagreeAreNamedInOneLine) {
  const std::string e = error_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                  {"MASTER_PORT", "29500"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                                  {"SLURM_STEP_ID", "0"}});
  EXPECT_NE(e.find("launch: RANK=1 (torchrun) but SLURM_PROCID=0 (slurm) in a world of 2: two launchers disagree "
                   "on this process's rank"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  const std::string local = error_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"RANK", "1"}, {"WORLD_SIZE", "2"},
                                      {"LOCAL_RANK", "0"}});
  EXPECT_NE(local.find("OMPI_COMM_WORLD_LOCAL_RANK=1 (mpirun) but LOCAL_RANK=0 (torchrun)"), std::string::npos)
      << local;
}

TEST(Launch, BadValuesAreRefused) {
  EXPECT_NE(error_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK='x': expected an integer"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}})
                .find("RANK=2 is outside the world of WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("not MASTER_ADDR"), std::string::npos);
  EXPECT_NE(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}, {"SLURM_NNODES", "2"}})
                .find("a Slurm step over 2 nodes without MASTER_ADDR"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::comm
