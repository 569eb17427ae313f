// --bind's plan from a machine's topology: one CPU per physical core (hyper-thread siblings
// left out), local rank r of L on cores [r C / L, (r + 1) C / L), numa by memory node, a
// launcher's own confinement kept whole; and the sysfs reader on a made-up two-socket machine.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tandem/cpu_binding.h"
#include "tandem/error.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

// 2 sockets (nodes) x 4 cores x 2 threads: CPUs 0-7 are the first threads, 8-15 their siblings
// (Linux's usual numbering); socket 0 holds cores 0-3 (CPUs 0-3, 8-11).
fs::path fake_sysfs() {
  const fs::path root = fs::temp_directory_path() / ("tandem-sysfs-" + std::to_string(::getpid()));
  fs::remove_all(root);
  put(root / "cpu/online", "0-15");
  for (int c = 0; c < 16; ++c) {
    const fs::path t = root / ("cpu/cpu" + std::to_string(c)) / "topology";
    put(t / "core_id", std::to_string(c % 4));
    put(t / "physical_package_id", std::to_string((c % 8) / 4));
  }
  put(root / "node/node0/cpulist", "0-3,8-11");
  put(root / "node/node1/cpulist", "4-7,12-15");
  return root;
}

std::vector<int> all(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

TEST(CpuBinding, TwoSocketsWithSiblingsSplitByPhysicalCores) {
  const fs::path root = fake_sysfs();
  const std::vector<CpuInfo> topo = read_cpu_topology(root.string());
  fs::remove_all(root);
  ASSERT_EQ(topo.size(), 16u);
  EXPECT_EQ(topo[9].core, topo[1].core);  // siblings share a core
  EXPECT_NE(topo[4].core, topo[0].core);  // core_id 0 of socket 1 is another core
  EXPECT_EQ(topo[13].node, 1);
  const CpuBinding r0 = plan_cpu_binding(BindMode::cores, 0, 2, topo, all(16));
  const CpuBinding r1 = plan_cpu_binding(BindMode::cores, 1, 2, topo, all(16));
  EXPECT_EQ(r0.cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(r1.cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(r0.node, 0);
  EXPECT_EQ(r1.node, 1);
  EXPECT_EQ(r0.physical_cores, 8);
  EXPECT_EQ(r1.describe(), "cores: CPUs 4-7 (4 of 8 physical cores, local rank 1 of 2), memory node 1");
  // 3 ranks: 8 cores cut at 8/3 and 16/3; no core twice.
  EXPECT_EQ(plan_cpu_binding(BindMode::cores, 1, 3, topo, all(16)).cpus, (std::vector<int>{2, 3, 4}));
  // numa: the rank's node, all its physical cores.
  const CpuBinding n1 = plan_cpu_binding(BindMode::numa, 1, 2, topo, all(16));
  EXPECT_EQ(n1.cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(n1.node, 1);
  // A launcher that confined the process to CPUs 5-6 (and their siblings): that is the share.
  const CpuBinding confined = plan_cpu_binding(BindMode::cores, 1, 2, topo, {5, 6, 13, 14});
  EXPECT_EQ(confined.cpus, (std::vector<int>{5, 6}));
  // More ranks than cores: round-robin, one core each.
  EXPECT_EQ(plan_cpu_binding(BindMode::cores, 9, 10, topo, all(16)).cpus, (std::vector<int>{1}));
  EXPECT_EQ(plan_cpu_binding(BindMode::none, 0, 2, topo, all(16)).describe(), "none");
}

TEST(CpuBinding, ThisMachineBindsAThreadToItsShare) {
  const CpuBinding b = plan_cpu_binding(BindMode::cores, 0, 1);
  ASSERT_FALSE(b.cpus.empty());
  set_cpu_binding(b);
  std::vector<int> got;
  std::thread([&] {
    EXPECT_TRUE(bind_this_thread());
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &set)) got.push_back(i);
  }).join();
  set_cpu_binding({});
  EXPECT_EQ(got, b.cpus);
  EXPECT_FALSE(bind_this_thread());
  EXPECT_THROW(parse_bind_mode("socket", "--bind"), Error);
}

}  // namespace
}  // namespace tandem
