// `tandem train --zero 3 --precision fp16` (dynamic loss scaling) under mpirun, from
// --loss-scale-init 2^24 so that the first steps overflow and are skipped:
//  - one rank (`mpirun -np 1`: nothing to shard, the streamer's own checks) saves the bytes of
//    one process's `--param-device cpu --precision fp16` and prints its epoch line's scale and
//    skipped steps; plain, with --grad-accum-steps 2 and with --clip-grad-norm;
//  - 2 ranks of batch 1 (the shards' flags summed over the ranks) skip the steps one process
//    of batch 2 skips from twice the scale (each rank's loss is the mean over its own samples)
//    and end at half its scale (their weights: MpiDist.Zero3Fp16* and Zero3Pairs.Fp16*,
//    within the reduction order);
//  - --loss-scale-init out of range or without a scaler, and --zero 3 with --offload-delay 1
//    and loss scaling, get one line.
// Skipped where no mpirun is on PATH.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <utility>

#include "memory/cli_shards.h"
#include "train/run_tandem.h"

namespace tandem {
namespace {

using testing::TempDir;
using testing::last_line;
using testing::run_tandem;

// Open MPI's consent to run as root (CI does), then the launcher the binary runs under.
std::string mpirun(int ranks) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun --oversubscribe --bind-to none "
         "-np " +
         std::to_string(ranks);
}

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A 3-layer GPT of width 32, 12 steps of batch `batch` per process in fp16 from `scale`.
std::string fp16_gpt(const TempDir& dir, int batch, const char* scale = "16777216") {
  return "train --model gpt-mini --n-layer 3 --n-head 2 --n-embd 32 --block-size 16 --data " + dir.str() +
         " --batch-size " + std::to_string(batch) +
         " --eval-batch-size 2 --max-steps 12 --eval-interval 12 --warmup-steps 0 --lr 1e-3 --progress 0 "
         "--num-workers 0 --threads 1 --device virt:0 --param-device cpu --precision fp16 --loss-scale-init " +
         scale;
}

// "loss_scale S skipped N" of the last epoch line ("" if none).
std::string scaling_of(const std::string& out) {
  std::string last;
  const std::regex re("loss_scale [0-9.e+]+ skipped [0-9]+");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    last = it->str();
  return last;
}
// Its scale and skipped steps.
std::pair<double, int> scale_and_skipped(const std::string& scaling) {
  double scale = 0;
  int skipped = -1;
  std::sscanf(scaling.c_str(), "loss_scale %lf skipped %d", &scale, &skipped);
  return {scale, skipped};
}

TEST(CliZero3Fp16, OneRankSavesOneProcesssBytesAndTwoRanksSkipItsSteps) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun on PATH";
  TempDir dir;
  testing::write_rule_shards(dir);
  for (const std::string extra : {"", " --grad-accum-steps 2", " --clip-grad-norm 0.05"}) {
    SCOPED_TRACE(extra);
    const auto one = run_tandem(fp16_gpt(dir, 2) + extra + " --save " + dir.file("one.st"));
    ASSERT_EQ(one.exit_code, 0) << one.out;
    const std::string scaling = scaling_of(one.out);
    ASSERT_FALSE(scaling.empty()) << one.out;
    const int skipped = scale_and_skipped(scaling).second;
    EXPECT_GE(skipped, 2) << "the first steps should overflow: " << scaling;
    EXPECT_LE(skipped, 10) << "the scale should back off until steps run: " << scaling;
    const auto rank = run_tandem(fp16_gpt(dir, 2) + extra + " --zero 3 --save " + dir.file("rank.st"), "2>&1",
                                 mpirun(1));
    ASSERT_EQ(rank.exit_code, 0) << rank.out;
    EXPECT_EQ(scaling_of(rank.out), scaling) << rank.out;
    EXPECT_GT(bytes_of(dir.file("one.st")).size(), 1000u);
    EXPECT_TRUE(bytes_of(dir.file("rank.st")) == bytes_of(dir.file("one.st")));
    const auto doubled = run_tandem(fp16_gpt(dir, 2, "33554432") + extra);
    ASSERT_EQ(doubled.exit_code, 0) << doubled.out;
    const auto two = run_tandem(fp16_gpt(dir, 1) + extra + " --zero 3", "2>&1", mpirun(2));
    ASSERT_EQ(two.exit_code, 0) << two.out;
    EXPECT_NE(two.out.find("(--zero 3): checked once every part's gradients are reduce-scattered"), std::string::npos)
        << two.out;
    const auto [want_scale, want_skipped] = scale_and_skipped(scaling_of(doubled.out));
    const auto [scale, two_skipped] = scale_and_skipped(scaling_of(two.out));
    EXPECT_EQ(two_skipped, want_skipped) << two.out;
    EXPECT_NEAR(2 * scale, want_scale, 1e-5 * want_scale) << two.out;  // printed to 6 digits
  }
}

TEST(CliZero3Fp16, BadScalingFlagsGetOneLine) {
  TempDir dir;
  testing::write_rule_shards(dir);
  std::string fp32 = fp16_gpt(dir, 2);
  fp32.replace(fp32.find("--precision fp16"), 16, "--precision fp32");
  for (const auto& [flags, want] :
       {std::pair{fp16_gpt(dir, 2, "0.5"), "--loss-scale-init 0.5: expected a scale in [1, 1e38]"},
        std::pair{fp32, "--loss-scale-init 16777216: expected dynamic loss scaling with it"},
        std::pair{fp16_gpt(dir, 2) + " --zero 3 --offload-delay 1",
                  "--zero 3: not supported with --offload-delay 1 and dynamic loss scaling yet"}}) {
    const auto r = run_tandem(flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.out;
    EXPECT_NE(last_line(r.out).find(want), std::string::npos) << flags << "\n" << r.out;
    EXPECT_EQ(r.out.find("step "), std::string::npos) << r.out;
  }
  // fp32 with --loss-scale dynamic takes it.
  const auto dynamic = run_tandem(fp32 + " --loss-scale dynamic");
  EXPECT_EQ(dynamic.exit_code, 0) << dynamic.out;
  EXPECT_NE(dynamic.out.find("GradScaler: 16777216"), std::string::npos) << dynamic.out;
}

}  // namespace
}  // namespace tandem
