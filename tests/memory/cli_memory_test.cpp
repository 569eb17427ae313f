// `tandem train` with the memory flags: the plan is printed before training (and in the
// metrics file's run record), --plan-only prints it and exits, a run that does not fit is
// refused before training with one line and exit 1, and --recompute blocks trains to the same
// losses as without it (printed to the last digit).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "memory/cli_shards.h"
#include "train/run_tandem.h"

namespace tandem {
namespace {

using testing::last_line;
using testing::run_tandem;
using testing::TempDir;

void write_shards(const TempDir& dir) { testing::write_rule_shards(dir); }

std::string bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string tiny_gpt(const TempDir& dir) {
  return "train --model gpt-mini --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --data " +
         dir.str() +
         " --batch-size 4 --eval-batch-size 4 --max-steps 6 --lr 1e-3 --progress 0 --num-workers 1";
}

TEST(CliMemory, PlanOnlyPrintsThePlanAndExits) {
  TempDir dir;
  write_shards(dir);
  const auto r = run_tandem(tiny_gpt(dir) + " --device virt:0 --recompute blocks --plan-only");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* s :
       {"memory plan (", "2 blocks recompute", "parameters", "gradients", "optimizer state",
        "activations", "workspace", "batches", "total", "the plan fits"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  EXPECT_EQ(r.out.find("epoch"), std::string::npos) << r.out;  // no training
}

TEST(CliMemory, RefusesARunThatDoesNotFit) {
  TempDir dir;
  write_shards(dir);
  const auto capped = run_tandem(tiny_gpt(dir) + " --device 'virt:0?memory_mb=1'");
  EXPECT_EQ(capped.exit_code, 1) << capped.out;
  const std::string line = last_line(capped.out);
  EXPECT_NE(line.find("[train] needs "), std::string::npos) << capped.out;
  EXPECT_NE(line.find("MiB of device memory, 1.0 MiB available (memory_mb of virt:0); try a "
                      "smaller --batch-size or "
                      "--recompute blocks or --optimizer-device cpu"),
            std::string::npos)
      << capped.out;
  EXPECT_EQ(capped.out.find("epoch"), std::string::npos) << capped.out;
  const auto budget = run_tandem(tiny_gpt(dir) + " --device-memory-budget 64KiB --plan-only");
  EXPECT_EQ(budget.exit_code, 1) << budget.out;
  EXPECT_NE(
      last_line(budget.out).find("of host memory, 0.1 MiB available (--device-memory-budget)"),
      std::string::npos)
      << budget.out;
  const auto pinned = run_tandem(tiny_gpt(dir) + " --device virt:0 --max-pinned-gb 0.00001");
  EXPECT_EQ(pinned.exit_code, 1) << pinned.out;
  EXPECT_NE(last_line(pinned.out).find("of pinned host memory"), std::string::npos) << pinned.out;
  const auto bad = run_tandem(tiny_gpt(dir) + " --device-memory-budget lots");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(
      last_line(bad.out).find("--device-memory-budget lots: expected bytes or a size like 24GiB"),
      std::string::npos)
      << bad.out;
  // A model without blocks that recompute (GPT blocks, a ResNet's residual blocks) is refused.
  if (std::filesystem::exists("/usr/share/datasets/fashion-mnist")) {
    const auto cnn = run_tandem(
        "train --model fmnist-cnn --recompute blocks --plan-only --data /usr/share/datasets/fashion-mnist");
    EXPECT_EQ(cnn.exit_code, 2) << cnn.out;
    EXPECT_NE(last_line(cnn.out).find("--recompute blocks: model fmnist-cnn has no block that recomputes"),
              std::string::npos)
        << cnn.out;
  }
  // A batch the training set cannot fill is refused by the plan as by the run, not planned
  // at the set's size.
  std::string big = tiny_gpt(dir);
  big.replace(big.find("--batch-size 4"), 14, "--batch-size 100000");
  for (const char* extra : {" --device virt:0 --plan-only", " --device virt:0"}) {
    const auto r = run_tandem(big + extra);
    EXPECT_EQ(r.exit_code, 2) << extra << "\n" << r.out;
    EXPECT_NE(last_line(r.out).find("--batch-size 100000 is larger than the "), std::string::npos) << r.out;
  }
}

// The epoch lines' train loss and test loss, as printed.
std::vector<std::string> losses(const std::string& out) {
  std::vector<std::string> v;
  const std::regex re("(train_loss|test_loss) ([0-9.]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it)
    v.push_back((*it)[0].str());
  return v;
}

// --max-pinned-gb against the pool's whole segments: the plan of this GPT holds a few KiB of
// pinned batches, but the pool reserves 2 MiB segments, so a cap of 0.001 GiB (1.02 MiB) is
// refused before training with one line and exit 1 (nothing saved); a cap of 2.048 MiB trains,
// and the pool's high-water stays within it (the pool's own cap at run time:
// tests/core/caching_allocator_test.cpp).
TEST(CliMemory, MaxPinnedGbCapsThePoolItself) {
  TempDir dir;
  write_shards(dir);
  const auto low = run_tandem(tiny_gpt(dir) + " --device virt:0 --max-pinned-gb 0.001 --save " + dir.file("w.st"));
  EXPECT_EQ(low.exit_code, 1) << low.out;
  EXPECT_EQ(last_line(low.out),
            "tandem: error: [train] needs 2.0 MiB of pinned host memory in the pool's whole 2 MiB segments, 1.0 MiB "
            "allowed (--max-pinned-gb); try a smaller --batch-size, --num-workers or --prefetch-factor")
      << low.out;
  EXPECT_EQ(low.out.find("step "), std::string::npos) << low.out;
  EXPECT_FALSE(std::ifstream(dir.file("w.st")).good());
  const auto fits = run_tandem(tiny_gpt(dir) + " --device virt:0 --max-pinned-gb 0.002");
  ASSERT_EQ(fits.exit_code, 0) << fits.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(fits.out, m, std::regex(R"(pinned pool high-water ([0-9.]+) MiB)"))) << fits.out;
  EXPECT_GT(std::stod(m[1]), 0.0);
  EXPECT_LE(std::stod(m[1]), 0.002 * 1024);
}

// --activations-device cpu with --recompute blocks on virt: the banner says so and the saved
// weights are the ones kept on the device give, byte for byte; without recompute, on the cpu
// or with another value, one line naming the flag.
TEST(CliMemory, ActivationsOnTheCpuGiveTheSameWeights) {
  TempDir dir;
  write_shards(dir);
  const std::string rc = tiny_gpt(dir) + " --device virt:0 --recompute blocks --save ";
  ASSERT_EQ(run_tandem(rc + dir.file("kept.st")).exit_code, 0);
  const auto moved = run_tandem(rc + dir.file("moved.st") + " --activations-device cpu");
  ASSERT_EQ(moved.exit_code, 0) << moved.out;
  EXPECT_NE(moved.out.find("activations: each block's kept input waits in host memory"), std::string::npos)
      << moved.out;
  EXPECT_GT(bytes(dir.file("kept.st")).size(), 1000u);
  EXPECT_TRUE(bytes(dir.file("kept.st")) == bytes(dir.file("moved.st")));
  for (const auto& [flags, want] : std::vector<std::pair<std::string, std::string>>{
           {" --device virt:0 --activations-device cpu", "--activations-device cpu: expected --recompute blocks too"},
           {" --recompute blocks --activations-device cpu",
            "--activations-device cpu: expected an accelerator --device (on cpu the activations are in host memory "
            "already), got cpu"},
           {" --device virt:0 --recompute blocks --activations-device gpu",
            "--activations-device: expected device or cpu, got gpu"}}) {
    const auto r = run_tandem(tiny_gpt(dir) + flags);
    EXPECT_NE(r.exit_code, 0) << flags;
    EXPECT_NE(last_line(r.out).find(want), std::string::npos) << flags << "\n" << r.out;
  }
}

// The memory flags plan one device's run: with --devices or --place the line names the flag given.
TEST(CliMemory, PlanFlagsWithSeveralDevicesNameTheFlagGiven) {
  TempDir dir;
  write_shards(dir);
  const auto r = run_tandem(tiny_gpt(dir) + " --devices virt:0,cpu --max-pinned-gb 1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(last_line(r.out), "tandem: error: [train] --devices virt:0,cpu: --max-pinned-gb plans one device's run; "
                              "not supported with --devices yet");
  const auto p = run_tandem(tiny_gpt(dir) + " --device virt:0 --place transformer.h.1=cpu --max-pinned-gb 1");
  EXPECT_EQ(p.exit_code, 2) << p.out;
  EXPECT_EQ(last_line(p.out), "tandem: error: [train] --place transformer.h.1=cpu: --max-pinned-gb plans one device's "
                              "run; not supported with --place yet");
}

// Recompute and CPU-held activations are per block: each replica of a batch split, each placed
// block recomputes and moves its own kept inputs (with the offloader of its device), and the
// weights are those of the same split or placement without them, bit for bit.
TEST(CliMemory, RecomputeAndHostActivationsWithSplitAndPlacement) {
  TempDir dir;
  write_shards(dir);
  for (const std::string layout : {" --devices virt:0,virt:1 --split 2,2", " --devices virt:0,cpu --split 2,2",
                                   " --device virt:0 --place transformer.h.1=virt:1",
                                   " --device virt:0 --place transformer.h.1=cpu"}) {
    const std::string run = tiny_gpt(dir) + layout + " --save ";
    ASSERT_EQ(run_tandem(run + dir.file("plain.st")).exit_code, 0) << layout;
    const auto rc = run_tandem(run + dir.file("rc.st") + " --recompute blocks");
    ASSERT_EQ(rc.exit_code, 0) << layout << "\n" << rc.out;
    const auto moved = run_tandem(run + dir.file("moved.st") + " --recompute blocks --activations-device cpu");
    ASSERT_EQ(moved.exit_code, 0) << layout << "\n" << moved.out;
    EXPECT_NE(moved.out.find("activations: each block's kept input waits in host memory"), std::string::npos)
        << moved.out;
    EXPECT_GT(bytes(dir.file("plain.st")).size(), 1000u);
    EXPECT_TRUE(bytes(dir.file("plain.st")) == bytes(dir.file("rc.st"))) << layout;
    EXPECT_TRUE(bytes(dir.file("plain.st")) == bytes(dir.file("moved.st"))) << layout;
  }
}

TEST(CliMemory, RecomputeTrainsToTheSameLossesAndWritesThePlan) {
  TempDir dir;
  write_shards(dir);
  const std::string metrics = dir.file("m.jsonl");
  const auto plain = run_tandem(tiny_gpt(dir) + " --device virt:0");
  const auto rc =
      run_tandem(tiny_gpt(dir) + " --device virt:0 --recompute blocks --metrics-file " + metrics);
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  ASSERT_EQ(rc.exit_code, 0) << rc.out;
  EXPECT_NE(rc.out.find("memory plan ("), std::string::npos) << rc.out;
  const std::vector<std::string> a = losses(plain.out), b = losses(rc.out);
  EXPECT_FALSE(a.empty()) << plain.out;
  EXPECT_EQ(a, b) << plain.out << "\n" << rc.out;
  std::ifstream f(metrics);
  std::string first;
  std::getline(f, first);
  EXPECT_NE(first.find("\"memory_plan\":{"), std::string::npos) << first;
  EXPECT_NE(first.find("\"recompute_blocks\":2"), std::string::npos) << first;
}

}  // namespace
}  // namespace tandem
