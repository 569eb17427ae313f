// prepare_checkpoint_dir on hostile file names: only "<name>.tmp-<pid>" with a process id that
// pid_t holds and no process has is removed; digits past pid_t's range, 0, signs and this
// process's own id leave the file (and never throw anything but tandem::Error).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/checkpoint_helpers.h"
#include "train/checkpoint/checkpoint_dir.h"

namespace ck = tandem::train::checkpoint;
using tandem::testing::ScratchDir;

namespace {

// A process id that was just in use and is not now: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

TEST(CheckpointDirNames, OnlyDeadWritersTemporaryFilesAreRemoved) {
  ScratchDir dir("ckpt_names");
  const std::string d = dir.path;
  const std::string dead = "step-0000000002.safetensors.tmp-" + std::to_string(dead_pid());
  const std::string kept[] = {
      "step-0000000001.safetensors.tmp-99999999999999999999",  // past 64 bits (std::stol threw)
      "step-0000000001.safetensors.tmp-4294967297",            // past pid_t, would wrap to 1
      "latest.json.tmp-0",
      "latest.json.tmp-+5",
      "latest.json.tmp--5",
      "latest.json.tmp-" + std::to_string(::getpid()),
  };
  for (const std::string& n : kept) std::ofstream(d + "/" + n) << "x";
  std::ofstream(d + "/" + dead) << "x";
  ASSERT_NO_THROW(ck::prepare_checkpoint_dir(d));
  for (const std::string& n : kept) EXPECT_TRUE(std::filesystem::exists(d + "/" + n)) << n;
  EXPECT_FALSE(std::filesystem::exists(d + "/" + dead)) << dead;
}

}  // namespace
