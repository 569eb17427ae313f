// `tandem train --param-device cpu`: a GPT whose fp32 training state (values, gradients, Adam's
// two moments) is more than ten times the device's memory trains on a capped virt device, and
// its saved weights after 20 steps are byte-identical to the same model trained resident on an
// uncapped one (also with --recompute blocks and --activations-device cpu); the plan and the
// pinned high-water mark of the metrics file agree; bad combinations get one line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/cli_shards.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/run_tandem.h"

namespace tandem {
namespace {

using testing::TempDir;
using testing::last_line;
using testing::run_tandem;

// 56 blocks of width 64: 2.80 M parameters, 44.8 MB of fp32 training state (4 x 4 bytes each).
constexpr int64_t kParams = 56 * (12 * 64 * 64 + 13 * 64) + 64 * 64 + 16 * 64 + 2 * 64;

std::string deep_gpt(const TempDir& dir) {
  return "train --model gpt-mini --n-layer 56 --n-head 2 --n-embd 64 --block-size 16 --data " + dir.str() +
         " --batch-size 2 --eval-batch-size 2 --max-steps 20 --eval-interval 20 --lr 1e-3 --progress 0 "
         "--num-workers 1";
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A 4-layer GPT of width 32 on `dir`'s shards, `steps` steps with an evaluation every
// `eval_every`, on virt:0.
std::string small_gpt(const TempDir& dir, int steps, int eval_every) {
  return "train --model gpt-mini --n-layer 4 --n-head 2 --n-embd 32 --block-size 16 --data " + dir.str() +
         " --batch-size 2 --eval-batch-size 2 --max-steps " + std::to_string(steps) + " --eval-interval " +
         std::to_string(eval_every) + " --warmup-steps 0 --lr 1e-3 --progress 0 --num-workers 1 --device virt:0";
}

nlohmann::json last_epoch(const std::string& metrics) {
  std::ifstream f(metrics);
  nlohmann::json last;
  for (std::string line; std::getline(f, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("type", "") == "epoch") last = j;
  }
  return last;
}

nlohmann::json plan_of(const std::string& metrics) {
  std::ifstream f(metrics);
  std::string first;
  std::getline(f, first);
  return nlohmann::json::parse(first).at("memory_plan");
}

// Each (extra flags, words of the last line) of `cases` added to `flags` is refused before
// training, with one line naming it.
void expect_refused(const std::string& flags, const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [extra, want] : cases) {
    const auto r = run_tandem(flags + extra);
    EXPECT_NE(r.exit_code, 0) << extra << "\n" << r.out;
    EXPECT_NE(last_line(r.out).find(want), std::string::npos) << extra << "\n" << r.out;
    EXPECT_EQ(r.out.find("step "), std::string::npos) << extra << "\n" << r.out;
  }
}

TEST(CliParamStream, TenTimesTheDeviceTrainsToTheResidentWeights) {
  TempDir dir;
  testing::write_rule_shards(dir);
  constexpr int kMemoryMb = 4;
  ASSERT_GE(kParams * 16, 10LL * kMemoryMb * 1024 * 1024);
  const auto resident = run_tandem(deep_gpt(dir) + " --device virt:0 --save " + dir.file("resident.st"));
  ASSERT_EQ(resident.exit_code, 0) << resident.out;
  const std::string capped = deep_gpt(dir) + " --device 'virt:0?memory_mb=" + std::to_string(kMemoryMb) + "'";
  // Resident, the capped device refuses the run before training, naming the way out.
  const auto refused = run_tandem(capped + " --recompute blocks");
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(last_line(refused.out).find("or --param-device cpu"), std::string::npos) << refused.out;
  for (const std::string extra : {"", " --activations-device cpu"}) {
    const std::string saved = dir.file("streamed.st"), metrics = dir.file("m.jsonl");
    const auto r = run_tandem(capped + " --param-device cpu --recompute blocks" + extra + " --save " + saved +
                              " --metrics-file " + metrics);
    ASSERT_EQ(r.exit_code, 0) << extra << "\n" << r.out;
    EXPECT_NE(r.out.find("parameters: at home in pinned host memory (--param-device cpu)"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("56 blocks streamed through 3 slots"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("each block updated on the host once its gradients are home"), std::string::npos) << r.out;
    EXPECT_GT(bytes_of(saved).size(), static_cast<size_t>(kParams * 4));
    EXPECT_TRUE(bytes_of(saved) == bytes_of(dir.file("resident.st"))) << extra;
    // The device stayed under its cap (virt drains its streams before the pool would pass it)
    // and the pinned pool holds what the plan counted there (the homes dominate it).
    const nlohmann::json plan = plan_of(metrics), epoch = last_epoch(metrics);
    const double device_peak = epoch.at("device_peak_reserved_bytes").get<double>();
    const double pinned_peak = epoch.at("pinned_peak_bytes").get<double>();
    EXPECT_LE(device_peak, kMemoryMb * 1048576.0) << extra;
    EXPECT_LE(plan.at("on_device").at("total").get<double>(), kMemoryMb * 1048576.0) << plan.dump();
    EXPECT_GE(pinned_peak, plan.at("on_host_pinned").at("total").get<double>() * 0.90) << plan.dump();
    EXPECT_LE(pinned_peak, plan.at("on_host_pinned").at("total").get<double>() * 1.10) << plan.dump();
  }
}

// Checkpoints of a streamed run (the weights and AdamW state read from their host homes) resume
// bit-exactly: 40 steps in one go, 4 + 36 from the step-4 checkpoint, and a run killed with
// SIGKILL in the middle then resumed from its folder all save the same bytes, which are also
// the resident run's.
TEST(CliParamStream, ResumeAndKillNineAreBitExact) {
  TempDir dir, ck, killed;
  testing::write_rule_shards(dir);
  const std::string flags = small_gpt(dir, 40, 20);
  const std::string streamed = flags + " --param-device cpu --checkpoint-every 1 --keep-checkpoints 50";
  ASSERT_EQ(run_tandem(flags + " --save " + dir.file("resident.st")).exit_code, 0);
  const auto full = run_tandem(streamed + " --checkpoint-dir " + ck.str() + " --save " + dir.file("full.st"));
  ASSERT_EQ(full.exit_code, 0) << full.out;
  const auto resumed = run_tandem(streamed + " --checkpoint-dir " + ck.str() + " --save " + dir.file("resumed.st") +
                                  " --resume " + ck.file("step-0000000004.safetensors"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("(global step 4)"), std::string::npos) << resumed.out;
  EXPECT_GT(bytes_of(dir.file("full.st")).size(), 1000u);
  EXPECT_TRUE(bytes_of(dir.file("full.st")) == bytes_of(dir.file("resumed.st")));
  EXPECT_TRUE(bytes_of(dir.file("full.st")) == bytes_of(dir.file("resident.st")));
  // SIGKILL a little after the first checkpoint is on disk, then resume from the folder. The
  // killed run's device adds 300 us to each of its operations (the same math), so that it is
  // still training at the kill however fast the machine.
  std::string slow = streamed;
  slow.replace(slow.find("--device virt:0"), 15, "--device 'virt:0?latency_us=300'");
  const std::string run = std::string(TANDEM_BINARY_DIR) + "/tandem " + slow + " --checkpoint-dir " +
                          killed.str() + " > " + dir.file("killed.log") + " 2>&1";
  const std::string script = "(" + run + " & p=$!; for i in $(seq 1200); do [ -f " +
                             killed.file(train::checkpoint::kManifestName) +
                             " ] && break; sleep 0.05; done; sleep 0.3; kill -9 $p; wait $p; exit 0)";
  ASSERT_EQ(std::system(script.c_str()), 0);
  EXPECT_EQ(bytes_of(dir.file("killed.log")).find("done:"), std::string::npos) << "the run ended before the kill";
  const auto after = run_tandem(streamed + " --checkpoint-dir " + killed.str() + " --resume --save " +
                                dir.file("after.st"));
  ASSERT_EQ(after.exit_code, 0) << after.out;
  EXPECT_TRUE(bytes_of(dir.file("full.st")) == bytes_of(dir.file("after.st"))) << after.out;
  // bf16: the restored values' compute copies are written into their pinned homes, which the
  // uploads read (they once got fresh pageable tensors and the uploads stale weights).
  TempDir ck16;
  const std::string bf16 = streamed + " --precision bf16 --checkpoint-dir " + ck16.str();
  ASSERT_EQ(run_tandem(bf16 + " --save " + dir.file("full16.st")).exit_code, 0);
  const auto resumed16 =
      run_tandem(bf16 + " --save " + dir.file("resumed16.st") + " --resume " + ck16.file("step-0000000004.safetensors"));
  ASSERT_EQ(resumed16.exit_code, 0) << resumed16.out;
  EXPECT_TRUE(bytes_of(dir.file("full16.st")) == bytes_of(dir.file("resumed16.st")));
}

// --offload-delay 1 with streamed parameters keeps its meaning: step t computes with the
// weights before update t - 1, which the host runs during step t. The saved weights are those
// of the resident model under the offloaded optimizer's delayed update (an evaluation applies
// the pending update in both), with and without a warmup, and differ from the undelayed ones.
// A checkpoint leaves the math alone: it saves the weights the next step computes with beside
// the homes, so runs with and without checkpoints, and a run resumed from one, save the same
// bytes (fp32 and bf16).
TEST(CliParamStream, DelayedUpdateIsTheOffloadedOptimizers) {
  TempDir dir, ck, ck16;
  testing::write_rule_shards(dir);
  const std::string flags = small_gpt(dir, 30, 12);
  ASSERT_EQ(run_tandem(flags + " --param-device cpu --save " + dir.file("undelayed.st")).exit_code, 0);
  for (const std::string warmup : {"", " --offload-delay-warmup 5"}) {
    const auto resident = run_tandem(flags + " --optimizer-device cpu --offload-delay 1" + warmup + " --save " +
                                     dir.file("resident.st"));
    ASSERT_EQ(resident.exit_code, 0) << resident.out;
    const auto streamed = run_tandem(flags + " --param-device cpu --offload-delay 1" + warmup + " --save " +
                                     dir.file("streamed.st"));
    ASSERT_EQ(streamed.exit_code, 0) << streamed.out;
    EXPECT_NE(streamed.out.find("each block updated on the host during the next step (--offload-delay 1"),
              std::string::npos)
        << streamed.out;
    EXPECT_GT(bytes_of(dir.file("streamed.st")).size(), 1000u);
    EXPECT_TRUE(bytes_of(dir.file("streamed.st")) == bytes_of(dir.file("resident.st"))) << warmup;
    EXPECT_FALSE(bytes_of(dir.file("streamed.st")) == bytes_of(dir.file("undelayed.st"))) << warmup;
  }
  // Checkpoints every 7 steps (none at an evaluation) change nothing; resuming from step 7
  // saves the same bytes.
  for (const auto& [precision, folder] : {std::pair<std::string, const TempDir*>{"fp32", &ck}, {"bf16", &ck16}}) {
    const std::string delayed = flags + " --param-device cpu --offload-delay 1 --precision " + precision;
    ASSERT_EQ(run_tandem(delayed + " --save " + dir.file("plain.st")).exit_code, 0);
    const std::string checkpointed =
        delayed + " --checkpoint-every 7 --keep-checkpoints 10 --checkpoint-dir " + folder->str();
    const auto full = run_tandem(checkpointed + " --save " + dir.file("full.st"));
    ASSERT_EQ(full.exit_code, 0) << full.out;
    const auto resumed = run_tandem(checkpointed + " --save " + dir.file("resumed.st") + " --resume " +
                                    folder->file("step-0000000007.safetensors"));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
    EXPECT_GT(bytes_of(dir.file("full.st")).size(), 1000u);
    EXPECT_TRUE(bytes_of(dir.file("full.st")) == bytes_of(dir.file("plain.st"))) << precision;
    EXPECT_TRUE(bytes_of(dir.file("full.st")) == bytes_of(dir.file("resumed.st"))) << precision;
  }
  // The pending update is the streamer's: a run without it is refused, not silently wrong.
  const auto resident_resume = run_tandem(flags + " --optimizer-device cpu --offload-delay 1 --resume " +
                                          ck.file("step-0000000007.safetensors"));
  EXPECT_NE(resident_resume.exit_code, 0) << resident_resume.out;
  EXPECT_NE(last_line(resident_resume.out).find("pending delayed update of streamed parameters"), std::string::npos)
      << resident_resume.out;
  // Clipping checks every gradient after the speculative updates: it works with the delay.
  const auto clipped = run_tandem(flags + " --param-device cpu --offload-delay 1 --clip-grad-norm 1");
  EXPECT_EQ(clipped.exit_code, 0) << clipped.out;
  const auto warmup_alone = run_tandem(flags + " --param-device cpu --offload-delay-warmup 3");
  EXPECT_NE(warmup_alone.exit_code, 0) << warmup_alone.out;
  EXPECT_NE(last_line(warmup_alone.out).find("--offload-delay-warmup 3: expected --offload-delay 1 with it"),
            std::string::npos)
      << warmup_alone.out;
}

// --optimizer-moments bf16: AdamW's two moments in bf16 with stochastic rounding. The plan's
// host optimizer state halves; the streamed run's host updates and the resident run's updates
// on virt (the same kernel, the same per-parameter noise) save the same bytes, which differ from
// the fp32 moments' run; combinations that cannot keep bf16 moments get one line.
TEST(CliParamStream, Bf16MomentsHalveTheStateAndMatchTheResidentRun) {
  TempDir dir;
  testing::write_rule_shards(dir);
  const std::string flags = small_gpt(dir, 20, 10);
  const auto state_mib = [&](const std::string& moments) {
    const auto r = run_tandem(flags + " --param-device cpu --plan-only --optimizer-moments " + moments);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    const size_t at = r.out.find("optimizer state ", r.out.find("streamed through"));
    return at == std::string::npos ? -1.0 : std::stod(r.out.substr(at + 16));
  };
  const double f32 = state_mib("fp32"), bf16 = state_mib("bf16");
  EXPECT_GT(f32, 0.1);
  EXPECT_NEAR(bf16, f32 / 2, 0.05);
  const std::string bf16_moments = flags + " --optimizer-moments bf16";
  ASSERT_EQ(run_tandem(bf16_moments + " --save " + dir.file("resident.st")).exit_code, 0);
  ASSERT_EQ(run_tandem(bf16_moments + " --param-device cpu --save " + dir.file("streamed.st")).exit_code, 0);
  ASSERT_EQ(run_tandem(flags + " --param-device cpu --save " + dir.file("f32.st")).exit_code, 0);
  EXPECT_GT(bytes_of(dir.file("resident.st")).size(), 1000u);
  EXPECT_TRUE(bytes_of(dir.file("resident.st")) == bytes_of(dir.file("streamed.st")));
  EXPECT_FALSE(bytes_of(dir.file("resident.st")) == bytes_of(dir.file("f32.st")));
  expect_refused(flags,
                 {{" --optimizer-moments fp8", "--optimizer-moments: expected fp32 or bf16, got fp8"},
                  {" --optimizer sgd --optimizer-moments bf16", "--optimizer-moments bf16: expected --optimizer adam or adamw"},
                  {" --param-device cpu --optimizer-split 0.5 --optimizer-moments bf16",
                   "--optimizer-split 0.5: not with --optimizer-moments bf16 (host moments only)"}});
}

// --optimizer-split 0.6: the embeddings and block 0 stay on the device and are updated there;
// the saved weights are the resident run's, and the plan puts their optimizer state on the
// device.
TEST(CliParamStream, OptimizerSplitSavesTheResidentWeights) {
  TempDir dir;
  testing::write_rule_shards(dir);
  const std::string flags = small_gpt(dir, 20, 10);
  ASSERT_EQ(run_tandem(flags + " --save " + dir.file("resident.st")).exit_code, 0);
  const auto split = run_tandem(flags + " --param-device cpu --optimizer-split 0.6 --save " + dir.file("split.st"));
  ASSERT_EQ(split.exit_code, 0) << split.out;
  EXPECT_NE(split.out.find("optimizer split (--optimizer-split 0.6): 2 parts ("), std::string::npos) << split.out;
  EXPECT_GT(bytes_of(dir.file("resident.st")).size(), 1000u);
  EXPECT_TRUE(bytes_of(dir.file("resident.st")) == bytes_of(dir.file("split.st")));
  const auto plan = run_tandem(flags + " --param-device cpu --optimizer-split 0.6 --plan-only");
  ASSERT_EQ(plan.exit_code, 0) << plan.out;
  const size_t at = plan.out.find("optimizer state ");
  ASSERT_NE(at, std::string::npos) << plan.out;
  EXPECT_GT(std::stod(plan.out.substr(at + 16)), 0.01) << plan.out;  // the device column
  expect_refused(flags, {{" --optimizer-split 0.5", "--optimizer-split 0.5: expected --param-device cpu"},
                         {" --param-device cpu --optimizer-split 0.5 --offload-delay 1", "0.5: not with --offload-delay 1 ("},
                         {" --param-device cpu --optimizer-split 0", "--optimizer-split 0: expected the host's share"},
                         {" --param-device cpu --optimizer-split 0.999", "the smallest device share is the outer part's"}});
}

// --param-prefetch auto: the deepest depth whose plan fits the device's budget (8 on a roomy
// cap, fewer on a tight one, 1 without a cap), and the weights are the resident run's.
TEST(CliParamStream, PrefetchAutoTakesTheDeepestThatFits) {
  TempDir dir;
  testing::write_rule_shards(dir);
  std::string flags = small_gpt(dir, 6, 6);
  flags.replace(flags.find("--n-layer 4"), 11, "--n-layer 12");  // depths 1 .. 8: 3 .. 10 slots
  const auto capped = [&](const std::string& device) {
    std::string f = flags;
    f.replace(f.find("--device virt:0"), 15, "--device " + device);
    return f + " --param-device cpu --param-prefetch auto";
  };
  const auto ahead = [](const std::string& out) {
    const size_t at = out.find("(--param-prefetch auto: ");
    return at == std::string::npos ? -1 : std::stoi(out.substr(at + 24));
  };
  const auto roomy = run_tandem(capped("virt:0?memory_mb=256") + " --plan-only");
  ASSERT_EQ(roomy.exit_code, 0) << roomy.out;
  EXPECT_EQ(ahead(roomy.out), 8) << roomy.out;
  EXPECT_NE(roomy.out.find("the deepest the device budget fits"), std::string::npos) << roomy.out;
  // A 4-block model holds 4 slots at most: 3 blocks ahead, whatever depth the budget allows.
  std::string four = small_gpt(dir, 6, 6) + " --param-device cpu --param-prefetch auto --plan-only";
  four.replace(four.find("--device virt:0"), 15, "--device virt:0?memory_mb=256");
  EXPECT_EQ(ahead(run_tandem(four).out), 3);
  const auto uncapped = run_tandem(capped("virt:0") + " --plan-only");
  EXPECT_EQ(ahead(uncapped.out), 1) << uncapped.out;
  EXPECT_NE(uncapped.out.find("no device budget is known"), std::string::npos) << uncapped.out;
  // A cap below depth 8's plan (in the device pool's 2 MiB segments): the deepest that fits it.
  std::string wide = flags;
  wide.replace(wide.find("--n-embd 32"), 11, "--n-embd 64");  // slots of 0.4 MiB: the depths differ in segments
  std::vector<int> segments;  // per depth 1 .. 8: the plan's device total in 2 MiB segments
  for (int depth = 1; depth <= 8; ++depth) {
    const auto r = run_tandem(wide + " --param-device cpu --plan-only --param-prefetch " + std::to_string(depth));
    const size_t at = r.out.find("  total ");
    ASSERT_NE(at, std::string::npos) << r.out;
    segments.push_back(static_cast<int>(std::ceil(std::stod(r.out.substr(at + 8)) / 2)));
  }
  const int cap = 2 * (segments.back() - 1);  // MiB
  int expected = 0;
  for (int depth = 1; depth <= 8; ++depth)
    if (2 * segments[static_cast<size_t>(depth - 1)] <= cap) expected = depth;
  ASSERT_GE(expected, 1) << "depth 1 and depth 8 fit the same segments";
  std::string mid_flags = wide + " --param-device cpu --param-prefetch auto --plan-only";
  mid_flags.replace(mid_flags.find("--device virt:0"), 15, "--device virt:0?memory_mb=" + std::to_string(cap));
  const auto mid = run_tandem(mid_flags);
  EXPECT_EQ(ahead(mid.out), expected) << mid.out;
  ASSERT_EQ(run_tandem(flags + " --save " + dir.file("resident.st")).exit_code, 0);
  const auto trained = run_tandem(capped("virt:0?memory_mb=256") + " --save " + dir.file("auto.st"));
  ASSERT_EQ(trained.exit_code, 0) << trained.out;
  EXPECT_NE(trained.out.find("10 block slots of"), std::string::npos) << trained.out;
  EXPECT_NE(trained.out.find("blocks uploaded 8 ahead"), std::string::npos) << trained.out;
  EXPECT_TRUE(bytes_of(dir.file("resident.st")) == bytes_of(dir.file("auto.st")));
  expect_refused(flags, {{" --param-device cpu --param-prefetch 0", "--param-prefetch 0: expected 1 to 8 blocks or auto"},
                         {" --param-device cpu --param-prefetch often", "--param-prefetch: expected a decimal integer"}});
}

// --zero 3 shards streamed host homes: every combination it cannot take is refused by name
// (under mpirun as in one process: the flags are checked before the ranks start).
// --grad-accum-steps 4 with streamed parameters: the device sums the micro-batches' gradients
// as a resident model does (the running sums go home and back between micro-batches) and the
// update runs once per step, so 20 steps save the resident accumulation run's bytes: with the
// host updates during the last backward, after it (--clip-grad-norm), at a deeper prefetch,
// with the optimizer split and in bf16; with --offload-delay 1 the offloaded optimizer's
// delayed accumulation run's bytes (docs/design.md). An epoch of 78 batches is 19 steps: the 2 batches short
// of a group at its end are dropped, as the resident run drops them; step 20 is epoch 2's first.
TEST(CliParamStream, AccumulationSavesTheResidentWeights) {
  TempDir dir;
  testing::write_rule_shards(dir);
  const std::string flags = small_gpt(dir, 20, 20) + " --grad-accum-steps 4";
  for (const std::string extra : {"", " --clip-grad-norm 0.05", " --precision bf16", " --offload-delay 1"}) {
    SCOPED_TRACE(extra);
    const std::string reference = extra == " --offload-delay 1" ? " --optimizer-device cpu" : "";
    const auto resident = run_tandem(flags + extra + reference + " --save " + dir.file("resident.st"));
    ASSERT_EQ(resident.exit_code, 0) << resident.out;
    EXPECT_NE(resident.out.find("156 train"), std::string::npos) << resident.out;
    EXPECT_NE(resident.out.find("\nepoch 2 "), std::string::npos) << resident.out;
    std::vector<std::string> streamed = {" --param-device cpu"};
    if (extra.empty()) streamed.insert(streamed.end(), {" --param-device cpu --param-prefetch 2",
                                                        " --param-device cpu --optimizer-split 0.5"});
    for (const std::string& s : streamed) {
      const auto r = run_tandem(flags + extra + s + " --save " + dir.file("streamed.st"));
      ASSERT_EQ(r.exit_code, 0) << s << "\n" << r.out;
      EXPECT_NE(r.out.find("gradient accumulation (--grad-accum-steps 4): each part's running gradient sum"),
                std::string::npos)
          << r.out;
      EXPECT_GT(bytes_of(dir.file("streamed.st")).size(), 1000u);
      EXPECT_TRUE(bytes_of(dir.file("streamed.st")) == bytes_of(dir.file("resident.st"))) << s;
    }
  }
}

TEST(CliParamStream, ZeroThreeRefusalsNameTheFlag) {
  TempDir dir;
  testing::write_rule_shards(dir);
  const std::string z3 = " --param-device cpu --zero 3";
  expect_refused(small_gpt(dir, 4, 4),
                 {{" --zero 2", "--zero: expected 0, 1 or 3, got 2"},
                  {" --zero 3", "--zero 3: expected --param-device cpu"},
                  {z3 + " --offload-delay 1 --checkpoint-dir " + dir.file("ck"),
                   "--zero 3: not supported with --offload-delay 1 and --checkpoint-dir/--resume"},
                  {z3 + " --optimizer-split 0.5", "--zero 3: not supported with --optimizer-split"},
                  {z3 + " --grad-compression topk:0.01", "--zero 3: not supported with --grad-compression topk"}});
  // In one process there is nothing to shard: the run streams as --param-device cpu does.
  const auto one = run_tandem(small_gpt(dir, 4, 4) + z3);
  ASSERT_EQ(one.exit_code, 0) << one.out;
  EXPECT_EQ(one.out.find("ZeRO-3"), std::string::npos) << one.out;
}

TEST(CliParamStream, BadCombinationsGetOneLine) {
  TempDir dir;
  testing::write_rule_shards(dir);
  // Clipping and loss scaling check every gradient after the speculative per-block updates.
  for (const char* checks : {" --clip-grad-norm 1", " --loss-scale dynamic"}) {
    const auto checked = run_tandem(deep_gpt(dir) + " --device virt:0 --param-device cpu" + checks);
    ASSERT_EQ(checked.exit_code, 0) << checked.out;
    EXPECT_NE(checked.out.find("clipping and loss scaling: checked on the host after the step's updates"),
              std::string::npos)
        << checked.out;
  }
  expect_refused(
      deep_gpt(dir),
      {{" --device virt:0 --param-device gpu", "--param-device: expected device or cpu, got gpu"},
           {" --param-device cpu", "--param-device cpu"},
           {" --device virt:0 --param-prefetch 2", "--param-prefetch 2: expected --param-device cpu"},
           {" --device virt:0 --param-device cpu --param-prefetch 9", "--param-prefetch 9: expected 1 to 8 blocks"},
           {" --device virt:0 --param-device cpu --place transformer.h.1=cpu", "--param-device cpu"},
           {" --device virt:0 --param-device cpu --max-pinned-gb 0.01", "MiB of pinned host memory, 10.2 MiB allowed (--max-pinned-gb); the parameters' homes (--param-device cpu) take "
            "11.4 MiB of it: raise --max-pinned-gb or use --param-device device"}});
}

// Streamed homes of a GPT are written from the init or from --init's file part by part (the
// model is built without memory): the same bytes as the resident run, which builds the model
// whole and loads the file, with --init-exclude (those tensors keep the seed's init), in bf16,
// and with the disk tier.
TEST(CliParamStream, InitFileWrittenPartByPartSavesTheResidentWeights) {
  TempDir dir, off;
  testing::write_rule_shards(dir);
  ASSERT_EQ(run_tandem(small_gpt(dir, 3, 3) + " --save " + dir.file("start.st")).exit_code, 0);
  const std::string flags = small_gpt(dir, 4, 4) + " --precision bf16 --init " + dir.file("start.st") +
                            " --init-exclude transformer.h.2.";
  const auto resident = run_tandem(flags + " --save " + dir.file("resident.st"));
  ASSERT_EQ(resident.exit_code, 0) << resident.out;
  const std::string streamed = " --param-device cpu";
  for (const std::string& s : {streamed, streamed + " --optimizer-state-device disk --offload-dir " + off.str()}) {
    const auto r = run_tandem(flags + s + " --save " + dir.file("streamed.st"));
    ASSERT_EQ(r.exit_code, 0) << s << "\n" << r.out;
    EXPECT_GT(bytes_of(dir.file("streamed.st")).size(), 1000u);
    EXPECT_TRUE(bytes_of(dir.file("streamed.st")) == bytes_of(dir.file("resident.st"))) << s;
  }
  // A file of another model is refused before training, as the resident run refuses it.
  std::string narrow = small_gpt(dir, 2, 2);
  narrow.replace(narrow.find("--n-embd 32"), 11, "--n-embd 16");
  const auto refused = run_tandem(narrow + " --param-device cpu --init " + dir.file("start.st"));
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_NE(last_line(refused.out).find("in the file, expected"), std::string::npos) << refused.out;
  // A prefix that names no tensor (a typo) would exclude nothing: refused, naming it.
  const auto typo = run_tandem(flags + streamed + " --init-exclude transformer.h.9.");
  EXPECT_EQ(typo.exit_code, 2) << typo.out;
  EXPECT_NE(last_line(typo.out).find("--init-exclude transformer.h.9.: no tensor of the model or of --init"),
            std::string::npos)
      << typo.out;
}

// --optimizer-device cpu beside --param-device cpu says what the streamed run does already:
// it runs, as the run without it, byte for byte.
TEST(CliParamStream, OptimizerDeviceCpuBesideItIsImplied) {
  TempDir dir;
  testing::write_rule_shards(dir);
  const std::string flags = small_gpt(dir, 4, 4) + " --param-device cpu --save ";
  const auto plain = run_tandem(flags + dir.file("plain.st"));
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  const auto both = run_tandem(flags + dir.file("both.st") + " --optimizer-device cpu");
  ASSERT_EQ(both.exit_code, 0) << both.out;
  EXPECT_NE(both.out.find("parameters: at home in pinned host memory (--param-device cpu)"), std::string::npos)
      << both.out;
  EXPECT_GT(bytes_of(dir.file("plain.st")).size(), 1000u);
  EXPECT_TRUE(bytes_of(dir.file("plain.st")) == bytes_of(dir.file("both.st")));
}

}  // namespace
}  // namespace tandem
