// `tandem train --optimizer-device cpu --optimizer-state-device disk --offload-dir DIR`: the
// master weights and moments live in files under DIR, and the saved weights are the host
// home's, byte for byte (f32 and bf16, AdamW and SGD, with recompute, with accumulation,
// resumed from a checkpoint, killed with SIGKILL and resumed, through io_uring and through the
// pread/pwrite pool); a GPT whose
// training state is three times --max-host-gb trains under the cap; bad folders and flags are
// refused with one line before training.
#include <gtest/gtest.h>

#include <sys/vfs.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/cli_shards.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "tandem/storage/io_engine.h"
#include "train/run_tandem.h"

namespace tandem {
namespace {

using testing::TempDir;
using testing::last_line;
using testing::run_tandem;

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// `flags` with the disk tier, checkpointing every step, in one go and resumed from the step-4
// checkpoint, save the host home's bytes (the run of `flags` alone).
void expect_resume_is_bit_exact(const TempDir& dir, const std::string& flags) {
  TempDir ck, off;
  const std::string disk = flags + " --optimizer-state-device disk --offload-dir " + off.str() +
                           " --checkpoint-every 1 --keep-checkpoints 20 --checkpoint-dir " + ck.str();
  ASSERT_EQ(run_tandem(flags + " --save " + dir.file("host.st")).exit_code, 0);
  const auto full = run_tandem(disk + " --save " + dir.file("full.st"));
  ASSERT_EQ(full.exit_code, 0) << full.out;
  const auto resumed =
      run_tandem(disk + " --save " + dir.file("resumed.st") + " --resume " + ck.file("step-0000000004.safetensors"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("(global step 4)"), std::string::npos) << resumed.out;
  EXPECT_TRUE(bytes_of(dir.file("full.st")) == bytes_of(dir.file("resumed.st")));
  EXPECT_TRUE(bytes_of(dir.file("full.st")) == bytes_of(dir.file("host.st")));
}

// A 4-layer GPT of width 32, small buckets (several disk units), on virt:0.
std::string small_gpt(const TempDir& dir, int steps, const std::string& optimizer_device = "cpu") {
  return "train --model gpt-mini --n-layer 4 --n-head 2 --n-embd 32 --block-size 16 --data " + dir.str() +
         " --batch-size 2 --eval-batch-size 2 --max-steps " + std::to_string(steps) + " --eval-interval " +
         std::to_string(steps) + " --warmup-steps 0 --lr 1e-3 --progress 0 --num-workers 1 --device virt:0 "
         "--optimizer-device " + optimizer_device + " --bucket-cap-mb 0.02";
}

// Trains `flags` with the host home and with the disk home (under `env`) and compares the bytes.
void expect_same_weights(const TempDir& dir, const std::string& flags, const std::string& env = "") {
  TempDir off;
  const auto host = run_tandem(flags + " --save " + dir.file("host.st"));
  ASSERT_EQ(host.exit_code, 0) << flags << "\n" << host.out;
  const auto disk = run_tandem(
      flags + " --optimizer-state-device disk --offload-dir " + off.str() + " --save " + dir.file("disk.st"), "2>&1",
      env);
  ASSERT_EQ(disk.exit_code, 0) << flags << "\n" << disk.out;
  EXPECT_NE(disk.out.find("master weights and moments on disk"), std::string::npos) << disk.out;
  // io_uring where the kernel allows it (the engine falls back to the pool, and says so).
  const bool uring = env.empty() && storage::IoEngine(1, 4096).uring();
  EXPECT_NE(disk.out.find(uring ? "; io_uring, " : "pread/pwrite pool"), std::string::npos) << disk.out;
  EXPECT_GT(bytes_of(dir.file("host.st")).size(), 1000u);
  EXPECT_TRUE(bytes_of(dir.file("host.st")) == bytes_of(dir.file("disk.st"))) << flags;
  EXPECT_TRUE(std::filesystem::is_empty(off.str())) << "the scratch files are gone";
}

TEST(CliDisk, DiskHomeSavesTheHostHomesBytes) {
  TempDir dir;
  testing::write_rule_shards(dir);
  const std::string base = small_gpt(dir, 12);
  for (const std::string extra : {"", " --precision bf16", " --optimizer sgd --momentum 0.9",
                                  " --recompute blocks", " --grad-accum-steps 2", " --optimizer-moments bf16"})
    expect_same_weights(dir, base + extra);
}

TEST(CliDisk, ThePreadPoolSavesTheSameBytes) {
  TempDir dir;
  testing::write_rule_shards(dir);
  expect_same_weights(dir, small_gpt(dir, 8) + " --precision bf16", "TANDEM_IO=threads");
}

// 12 steps in one go and 4 + 8 from the step-4 checkpoint, with the disk home, save the host
// home's bytes.
TEST(CliDisk, ResumedFromACheckpointIsBitExact) {
  TempDir dir;
  testing::write_rule_shards(dir);
  const std::string flags = small_gpt(dir, 12);
  expect_resume_is_bit_exact(dir, flags);
}

// A disk-home run killed with SIGKILL after its first checkpoint leaves no file in its offload
// folder (the files were unlinked when created) and, resumed from its checkpoint folder, saves
// the uninterrupted run's bytes.
TEST(CliDisk, KilledWithSigkillResumesToTheUninterruptedWeights) {
  TempDir dir, ck, off, killed;
  testing::write_rule_shards(dir);
  const std::string flags = small_gpt(dir, 30) + " --optimizer-state-device disk --offload-dir " + off.str() +
                            " --checkpoint-every 1 --keep-checkpoints 50";
  ASSERT_EQ(run_tandem(flags + " --checkpoint-dir " + ck.str() + " --save " + dir.file("full.st")).exit_code, 0);
  // The killed run's device adds 300 us to each operation (the same math): still training at the kill.
  std::string slow = flags;
  slow.replace(slow.find("--device virt:0"), 15, "--device 'virt:0?latency_us=300'");
  const std::string run = std::string(TANDEM_BINARY_DIR) + "/tandem " + slow + " --checkpoint-dir " + killed.str() +
                          " > " + dir.file("killed.log") + " 2>&1";
  const std::string script = "(" + run + " & p=$!; for i in $(seq 1200); do [ -f " +
                             killed.file(train::checkpoint::kManifestName) +
                             " ] && break; sleep 0.05; done; sleep 0.3; kill -9 $p; wait $p; exit 0)";
  ASSERT_EQ(std::system(script.c_str()), 0);
  EXPECT_EQ(bytes_of(dir.file("killed.log")).find("done:"), std::string::npos) << "the run ended before the kill";
  EXPECT_TRUE(std::filesystem::is_empty(off.str())) << "the scratch files outlived the process";
  const auto after =
      run_tandem(flags + " --checkpoint-dir " + killed.str() + " --resume --save " + dir.file("after.st"));
  ASSERT_EQ(after.exit_code, 0) << after.out;
  EXPECT_TRUE(bytes_of(dir.file("full.st")) == bytes_of(dir.file("after.st"))) << after.out;
}

nlohmann::json first_record(const std::string& metrics) {
  std::ifstream f(metrics);
  std::string first;
  std::getline(f, first);
  return nlohmann::json::parse(first);
}

// 56 blocks of width 64: 2.80 M parameters, 44.8 MB of f32 master weights, gradients and AdamW
// moments: more than three times a 14.7 MB host cap. The host home is refused under the cap,
// naming the disk tier; the disk home trains 20 steps under it and saves the uncapped host
// home's bytes, its pinned pool below the cap.
TEST(CliDisk, ThreeTimesTheHostCapTrainsToTheHostHomesWeights) {
  TempDir dir, off;
  testing::write_rule_shards(dir);
  constexpr int64_t kParams = 56 * (12 * 64 * 64 + 13 * 64) + 64 * 64 + 16 * 64 + 2 * 64;
  const double cap_gb = 0.0137;
  ASSERT_GE(kParams * 16, 3 * static_cast<int64_t>(cap_gb * (1 << 30)));
  const std::string flags =
      "train --model gpt-mini --n-layer 56 --n-head 2 --n-embd 64 --block-size 16 --data " + dir.str() +
      " --batch-size 2 --eval-batch-size 2 --max-steps 20 --eval-interval 20 --lr 1e-3 --progress 0 "
      "--num-workers 1 --device virt:0 --optimizer-device cpu --bucket-cap-mb 0.1";
  const std::string capped = flags + " --max-host-gb " + std::to_string(cap_gb);
  ASSERT_EQ(run_tandem(flags + " --save " + dir.file("host.st")).exit_code, 0);
  const auto refused = run_tandem(capped);
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(last_line(refused.out).find("allowed (--max-host-gb)"), std::string::npos) << refused.out;
  EXPECT_NE(last_line(refused.out).find("--optimizer-state-device disk --offload-dir DIR"), std::string::npos)
      << refused.out;
  EXPECT_EQ(refused.out.find("step "), std::string::npos) << refused.out;
  const std::string metrics = dir.file("m.jsonl");
  const auto r = run_tandem(capped + " --optimizer-state-device disk --offload-dir " + off.str() + " --save " +
                            dir.file("disk.st") + " --metrics-file " + metrics);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("disk tier (--optimizer-state-device disk)"), std::string::npos) << r.out;
  EXPECT_TRUE(bytes_of(dir.file("host.st")) == bytes_of(dir.file("disk.st")));
  const nlohmann::json plan = first_record(metrics).at("memory_plan");
  EXPECT_GE(plan.at("on_disk").at("total").get<double>(), kParams * 12.0) << plan.dump();
  EXPECT_LE(plan.at("on_host_pinned").at("total").get<double>() + plan.at("host_pageable").get<double>(),
            cap_gb * (1 << 30))
      << plan.dump();
}

TEST(CliDisk, BadFoldersAndFlagsAreRefusedWithOneLine) {
  TempDir dir, off;
  testing::write_rule_shards(dir);
  const std::string flags = small_gpt(dir, 2);
  std::ofstream(dir.file("plain")) << "x";
  std::vector<std::pair<std::string, std::string>> cases = {
      {" --optimizer-state-device disk --offload-dir " + dir.file("missing"), "No such file or directory"},
      {" --optimizer-state-device disk --offload-dir " + dir.file("plain"), "not a folder"},
      {" --optimizer-state-device disk --offload-dir /proc", "not writable"},
      {" --optimizer-state-device disk", "expected --offload-dir DIR"},
      {" --offload-dir " + off.str(), "expected --optimizer-state-device disk with it"},
      {" --optimizer-state-device nvme --offload-dir " + off.str(), "expected host or disk"},
      {" --optimizer-state-device disk --offload-dir " + off.str() + " --offload-delay 1", "--offload-delay 0"},
  };
  struct statfs s {};
  if (::statfs("/dev/shm", &s) == 0 && s.f_type == 0x01021994)  // tmpfs: memory, not a disk
    cases.emplace_back(" --optimizer-state-device disk --offload-dir /dev/shm", "not a disk");
  for (const auto& [extra, want] : cases) {
    const auto r = run_tandem(flags + extra);
    EXPECT_EQ(r.exit_code, 2) << extra << "\n" << r.out;
    EXPECT_NE(last_line(r.out).find(want), std::string::npos) << extra << "\n" << r.out;
    EXPECT_EQ(r.out.find("step "), std::string::npos) << extra << "\n" << r.out;
  }
  const auto r = run_tandem(small_gpt(dir, 2, "device") + " --optimizer-state-device disk --offload-dir " + off.str());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(last_line(r.out).find("expected --optimizer-device cpu"), std::string::npos) << r.out;
}

// --param-device cpu: a 4-layer GPT of width 32 streamed block by block on virt:0.
std::string streamed_gpt(const TempDir& dir, int steps) {
  return "train --model gpt-mini --n-layer 4 --n-head 2 --n-embd 32 --block-size 16 --data " + dir.str() +
         " --batch-size 2 --eval-batch-size 2 --max-steps " + std::to_string(steps) + " --eval-interval " +
         std::to_string(steps) + " --warmup-steps 0 --lr 1e-3 --progress 0 --num-workers 1 --device virt:0 "
         "--param-device cpu";
}

// The streamed home with the disk tier (its parts' master values and optimizer state in files)
// saves the streamed home's bytes: f32 and bf16, AdamW and SGD, with accumulation.
TEST(CliDisk, StreamedDiskHomeSavesTheStreamedHostHomesBytes) {
  TempDir dir;
  testing::write_rule_shards(dir);
  const std::string base = streamed_gpt(dir, 10);
  for (const std::string extra : {"", " --precision bf16", " --optimizer sgd --momentum 0.9",
                                  " --precision bf16 --optimizer sgd --momentum 0.9", " --grad-accum-steps 2",
                                  " --precision bf16 --grad-accum-steps 2 --recompute blocks"}) {
    TempDir off;
    const std::string flags = base + extra;
    const auto host = run_tandem(flags + " --save " + dir.file("host.st"));
    ASSERT_EQ(host.exit_code, 0) << flags << "\n" << host.out;
    const auto disk = run_tandem(flags + " --optimizer-state-device disk --offload-dir " + off.str() + " --save " +
                                 dir.file("disk.st"));
    ASSERT_EQ(disk.exit_code, 0) << flags << "\n" << disk.out;
    EXPECT_NE(disk.out.find("the disk tier (--optimizer-state-device disk): the master values"), std::string::npos)
        << disk.out;
    EXPECT_NE(disk.out.find("disk: read "), std::string::npos) << disk.out;
    EXPECT_TRUE(bytes_of(dir.file("host.st")) == bytes_of(dir.file("disk.st"))) << flags;
    EXPECT_TRUE(std::filesystem::is_empty(off.str())) << "the scratch files are gone";
  }
}

// 10 steps in one go and 4 + 6 from the step-4 checkpoint, streamed with the disk tier, save
// the streamed host home's bytes.
TEST(CliDisk, StreamedDiskHomeResumedFromACheckpointIsBitExact) {
  TempDir dir;
  testing::write_rule_shards(dir);
  const std::string flags = streamed_gpt(dir, 10) + " --precision bf16";
  expect_resume_is_bit_exact(dir, flags);
}

// 56 blocks of width 64 in bf16, streamed: 2.80 M parameters whose f32 values and AdamW moments
// (33.6 MB) are more than three times a 10.7 MB host cap. The streamed home is refused under
// the cap; with the disk tier it trains 20 steps under it (the host keeps the bf16 compute
// copies, the gradient slabs and a window of parts) and saves the uncapped streamed home's bytes.
TEST(CliDisk, StreamedThreeTimesTheHostCapTrainsToTheHostHomesWeights) {
  TempDir dir, off;
  testing::write_rule_shards(dir);
  constexpr int64_t kParams = 56 * (12 * 64 * 64 + 13 * 64) + 64 * 64 + 16 * 64 + 2 * 64;
  const double cap_gb = 0.01;
  ASSERT_GE(kParams * 12, 3 * static_cast<int64_t>(cap_gb * (1 << 30)));
  const std::string flags =
      "train --model gpt-mini --n-layer 56 --n-head 2 --n-embd 64 --block-size 16 --data " + dir.str() +
      " --batch-size 2 --eval-batch-size 2 --max-steps 20 --eval-interval 20 --lr 1e-3 --progress 0 "
      "--num-workers 1 --device virt:0 --param-device cpu --precision bf16";
  const std::string capped = flags + " --max-host-gb " + std::to_string(cap_gb);
  ASSERT_EQ(run_tandem(flags + " --save " + dir.file("host.st")).exit_code, 0);
  const auto refused = run_tandem(capped);
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(last_line(refused.out).find("allowed (--max-host-gb)"), std::string::npos) << refused.out;
  EXPECT_NE(last_line(refused.out).find("can go to disk: --optimizer-state-device disk --offload-dir DIR"),
            std::string::npos)
      << refused.out;
  const std::string metrics = dir.file("m.jsonl");
  const auto r = run_tandem(capped + " --optimizer-state-device disk --offload-dir " + off.str() + " --save " +
                            dir.file("disk.st") + " --metrics-file " + metrics);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("(the disk tier's window of parts; the rest on disk)"), std::string::npos) << r.out;
  EXPECT_TRUE(bytes_of(dir.file("host.st")) == bytes_of(dir.file("disk.st")));
  const nlohmann::json plan = first_record(metrics).at("memory_plan");
  EXPECT_GE(plan.at("on_disk").at("total").get<double>(), kParams * 12.0) << plan.dump();
  EXPECT_LE(plan.at("on_host_pinned").at("total").get<double>() + plan.at("host_pageable").get<double>(),
            cap_gb * (1 << 30))
      << plan.dump();
}

}  // namespace
}  // namespace tandem
