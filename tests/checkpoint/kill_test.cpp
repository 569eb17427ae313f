// kill -9 at random moments while a run writes a checkpoint every 2 steps, 20 times over one
// folder: after every kill the manifest names a checkpoint that loads and verifies. And
// SIGINT (Ctrl-C) stops a run after its step with a checkpoint and exit code 130, leaving
// no temporary file. Each run is the `tandem` program (fork + exec) on Fashion-MNIST.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "tandem/error.h"
#include "tandem/train/config.h"
#include "checkpoint/checkpoint_helpers.h"
#include "train/checkpoint/checkpoint_dir.h"

using namespace tandem;
namespace ck = tandem::train::checkpoint;
using tandem::testing::ScratchDir;

namespace {

bool have_fashion_mnist() {
  return std::filesystem::exists(std::string(train::kDefaultDataDir) + "/train-images-idx3-ubyte.gz");
}

// Starts `tandem train` on the mlp, writing checkpoints into `dir`; output to `log`.
pid_t start_run(const std::string& dir, const std::string& log, const char* every) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string bin = std::string(TANDEM_BINARY_DIR) + "/tandem";
    if (!std::freopen(log.c_str(), "w", stdout) || !std::freopen(log.c_str(), "a", stderr)) ::_exit(120);
    ::execl(bin.c_str(), bin.c_str(), "train", "--model", "mlp", "--epochs", "2", "--threads", "1", "--progress", "0",
            "--checkpoint-dir", dir.c_str(), "--checkpoint-every", every, static_cast<char*>(nullptr));
    ::_exit(121);
  }
  return pid;
}

void expect_no_temporaries(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST(Kill, NineDuringSavesNeverLosesTheLastGoodCheckpoint) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  ScratchDir scratch("kill9");
  const std::string dir = scratch.path + "/ck";
  const std::string manifest = dir + "/" + ck::kManifestName;
  // The first run lives until its first checkpoint is on disk; how long that took (loading
  // and two steps, slower on a loaded machine) scales the random kill moments of the rest,
  // so they land across loading, steps and saves whatever the machine's load.
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t first = start_run(dir, scratch.path + "/log", "2");
  while (!std::filesystem::exists(manifest) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto first_save = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  ::kill(first, SIGKILL);
  ::waitpid(first, nullptr, 0);
  ASSERT_TRUE(std::filesystem::exists(manifest)) << "no checkpoint within 120 s: "
                                                 << tandem::testing::file_bytes(scratch.path + "/log");
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int64_t> delay_ms(first_save.count() / 2, first_save.count() * 3);
  for (int i = 0; i < 20; ++i) {
    const pid_t pid = start_run(dir, scratch.path + "/log", "2");
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ASSERT_TRUE(std::filesystem::exists(manifest)) << "the manifest went missing after kill " << i + 1;
    try {
      const ck::Located loc = ck::locate_checkpoint(dir);
      EXPECT_EQ(loc.fallback, "") << "kill " << i + 1 << ": the manifest's checkpoint failed: " << loc.fallback;
    } catch (const Error& e) {
      ADD_FAILURE() << "kill " << i + 1 << ": no checkpoint verifies: " << e.what();
    }
  }
}

TEST(Kill, CtrlCStopsWithACheckpointAndExitCode130) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  ScratchDir scratch("sigint");
  const std::string dir = scratch.path + "/ck";
  const pid_t pid = start_run(dir, scratch.path + "/log", "0");
  // The signal goes once the banner is out (the stop handler is in place before it; on a
  // loaded machine exec and loading alone can take longer than any fixed delay), a little
  // into training.
  const auto t0 = std::chrono::steady_clock::now();
  while (tandem::testing::file_bytes(scratch.path + "/log").find("tandem train:") == std::string::npos &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << tandem::testing::file_bytes(scratch.path + "/log");
  if (WEXITSTATUS(status) == 0) GTEST_SKIP() << "the run ended before the signal";
  EXPECT_EQ(WEXITSTATUS(status), 130) << tandem::testing::file_bytes(scratch.path + "/log");
  const ck::Located loc = ck::locate_checkpoint(dir);
  EXPECT_EQ(loc.fallback, "");
  EXPECT_NE(tandem::testing::file_bytes(scratch.path + "/log").find("(stop)"), std::string::npos);
  expect_no_temporaries(dir);
}

}  // namespace
