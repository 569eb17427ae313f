// A corrupt or truncated checkpoint is refused naming the file and the failing check; a
// folder falls back to the newest good checkpoint and says so; a full disk (a small tmpfs)
// fails the run with a clear error and leaves the previous checkpoint named and intact.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <filesystem>
#include <fstream>

#include "tandem/error.h"
#include "checkpoint/checkpoint_helpers.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/checkpoint_file.h"

using namespace tandem;
namespace ck = tandem::train::checkpoint;
using tandem::testing::file_bytes;
using tandem::testing::ScratchDir;
using tandem::testing::small_config;

namespace {

// Two epochs with checkpoints at steps 30 and 60 (the epoch ends).
std::string make_checkpoints(const ScratchDir& dir) {
  train::TrainConfig cfg = small_config();
  cfg.checkpoint_dir = dir.path + "/ck";
  tandem::testing::train_and_save(cfg, dir.path + "/w.safetensors");
  return cfg.checkpoint_dir;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string error_of(const std::string& path) {
  try {
    ck::read_checkpoint_file(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::format);
    return e.what();
  }
  return "";
}

TEST(Verify, AFlippedByteFailsItsTensorsCrc) {
  ScratchDir dir("crc");
  const std::string ck = make_checkpoints(dir);
  const std::string path = ck + "/step-0000000060.safetensors";
  std::string bytes = file_bytes(path);
  ASSERT_GT(bytes.size(), 4096u);
  bytes[bytes.size() - 100] ^= 0x01;  // in the last tensor's data
  write_bytes(path, bytes);
  const std::string what = error_of(path);
  EXPECT_NE(what.find(path), std::string::npos) << what;
  EXPECT_NE(what.find("fails its CRC-32 check"), std::string::npos) << what;
}

TEST(Verify, ATruncatedFileIsNamed) {
  ScratchDir dir("trunc");
  const std::string ck = make_checkpoints(dir);
  const std::string path = ck + "/step-0000000060.safetensors";
  const std::string bytes = file_bytes(path);
  write_bytes(path, bytes.substr(0, bytes.size() / 2));
  const std::string what = error_of(path);
  EXPECT_NE(what.find(path), std::string::npos) << what;
  EXPECT_NE(what.find("truncated"), std::string::npos) << what;
}

TEST(Verify, AFolderFallsBackToTheNewestGoodCheckpoint) {
  ScratchDir dir("fallback");
  const std::string ck = make_checkpoints(dir);
  std::string bytes = file_bytes(ck + "/step-0000000060.safetensors");
  bytes[bytes.size() - 1] ^= 0x10;
  write_bytes(ck + "/step-0000000060.safetensors", bytes);
  const ck::Located loc = ck::locate_checkpoint(ck);
  EXPECT_EQ(loc.path, ck + "/step-0000000030.safetensors");
  EXPECT_NE(loc.fallback.find("step-0000000060.safetensors"), std::string::npos) << loc.fallback;
  EXPECT_NE(loc.fallback.find("CRC-32"), std::string::npos) << loc.fallback;
  // The resumed run says so in its banner.
  train::TrainConfig cfg = small_config();
  cfg.resume = ck;
  train::Trainer t(cfg, tandem::testing::train_set(), tandem::testing::test_set());
  EXPECT_NE(t.describe().find("warning: passed over"), std::string::npos) << t.describe();
  // A file given by name does not fall back.
  EXPECT_THROW(ck::locate_checkpoint(ck + "/step-0000000060.safetensors"), Error);
}

TEST(Verify, AFullDiskLeavesThePreviousCheckpointIntact) {
  ScratchDir dir("full");
  const std::string mnt = dir.path + "/small";
  std::filesystem::create_directories(mnt);
  // The mlp's checkpoint (weights and two Adam moments) is 2.4 MB: one fits, two do not.
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=4m") != 0) GTEST_SKIP() << "cannot mount a tmpfs here";
  struct Unmount {
    std::string p;
    ~Unmount() { ::umount(p.c_str()); }
  } unmount{mnt};
  train::TrainConfig cfg = small_config();
  cfg.checkpoint_dir = mnt;
  cfg.checkpoint_every = 10;
  try {
    train::Trainer t(cfg, tandem::testing::train_set(), tandem::testing::test_set());
    t.fit();
    FAIL() << "the run went on although its checkpoints could not be written";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(mnt + "/step-0000000020.safetensors"), std::string::npos) << e.what();
  }
  const ck::Located loc = ck::locate_checkpoint(mnt);
  EXPECT_EQ(loc.path, mnt + "/step-0000000010.safetensors");
  EXPECT_EQ(loc.fallback, "");  // the manifest names it
  for (const auto& e : std::filesystem::directory_iterator(mnt))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

}  // namespace
