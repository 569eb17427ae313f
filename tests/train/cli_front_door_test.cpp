// What a new user meets first: dry runs that refuse what the run would, a GPT planned without
// token data, language-model defaults and a step-counted progress bar, and a resume that takes
// the checkpoint's recorded configuration (docs/training.md, docs/checkpoints.md).
// The data: ids[i] = (7 i + i / 13) mod 64 (as cli_lm_test.cpp), 2,600 training tokens.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/temp_dir.h"
#include "tandem/data/token_shard.h"
#include "train/run_tandem.h"

namespace tandem {
namespace {

using testing::CmdResult;
using testing::run_tandem;
using testing::TempDir;

void write_shards(const TempDir& dir) {
  std::vector<uint32_t> train, val;
  for (uint32_t i = 0; i < 2600; ++i) train.push_back((i * 7 + i / 13) % 64);
  for (uint32_t i = 5000; i < 5300; ++i) val.push_back((i * 7 + i / 13) % 64);
  data::write_token_shard(dir.file("train.tok"), train, 64);
  data::write_token_shard(dir.file("val.tok"), val, 64);
}

// A tiny GPT on the shards (81 windows of 32 tokens) on `device`, one compute thread, no loader
// thread.
std::string tiny(const TempDir& dir, const std::string& device = "virt:0") {
  return "train --model gpt2 --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --data " + dir.str() +
         " --device " + device + " --threads 1 --num-workers 0 --seed 1";
}

std::string value_line(const std::string& config, const std::string& key) {
  const size_t at = config.find("\n" + key + " = ");
  if (at == std::string::npos) return "";
  return config.substr(at + 1, config.find('\n', at + 1) - at - 1);
}

TEST(FrontDoor, DryRunsRefuseWhatTheRunRefuses) {
  TempDir dir;
  write_shards(dir);
  // The warm-up check: a whole epoch of warm-up (10 steps of batch 8) in a 4-step run.
  const std::string warm = tiny(dir) + " --max-steps 4 --epochs 1 --warmup-epochs 1";
  for (const char* dry : {" --plan-only", " --print-config", ""}) {
    const CmdResult r = run_tandem(warm + dry);
    EXPECT_EQ(r.exit_code, 2) << dry << "\n" << r.out;
    EXPECT_NE(r.out.find("--warmup-epochs 1: expected fewer warmup steps than the run's 4 steps"), std::string::npos)
        << dry << "\n" << r.out;
  }
  // The activations offloaded from the host to the host.
  const std::string act = tiny(dir, "cpu") + " --max-steps 2 --recompute blocks --activations-device cpu";
  for (const char* dry : {" --plan-only", " --print-config", ""}) {
    const CmdResult r = run_tandem(act + dry);
    EXPECT_EQ(r.exit_code, 2) << dry << "\n" << r.out;
    EXPECT_NE(r.out.find("--activations-device cpu: expected an accelerator --device"), std::string::npos)
        << dry << "\n" << r.out;
  }
}

TEST(FrontDoor, GptPlansWithoutTokenData) {
  // No --data: GPT-2's vocabulary and the model's block size; the default data is not read.
  const CmdResult r = run_tandem("train --model gpt-mini --plan-only");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("memory plan ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the plan fits"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("fashion-mnist"), std::string::npos) << r.out;
  const CmdResult xl = run_tandem("train --model gpt2-xl --device 'virt:0?compute=none' --plan-only");
  EXPECT_NE(xl.out.find("memory plan (1557611200 parameters"), std::string::npos) << xl.out;
}

TEST(FrontDoor, LanguageModelDefaultsAndStepProgress) {
  TempDir dir;
  write_shards(dir);
  const CmdResult c = run_tandem(tiny(dir) + " --max-steps 30 --print-config");
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_EQ(value_line(c.out, "batch_size"), "batch_size = 8");
  EXPECT_EQ(value_line(c.out, "eval_batch_size"), "eval_batch_size = 8");
  EXPECT_EQ(value_line(c.out, "warmup_steps"), "warmup_steps = 3");
  // Given flags stay as given.
  const CmdResult g = run_tandem(tiny(dir) + " --max-steps 30 --batch-size 4 --lr 0.01 --print-config");
  EXPECT_EQ(value_line(g.out, "batch_size"), "batch_size = 4");
  EXPECT_EQ(value_line(g.out, "eval_batch_size"), "eval_batch_size = 4");
  EXPECT_EQ(value_line(g.out, "lr"), "lr = 0.01");
  // The run: 20 steps of a GPT with every other flag at its default.
  const CmdResult r = run_tandem(tiny(dir) + " --max-steps 12 --progress 1 --log-interval 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("step 12/12 ["), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("epoch 1/5 ["), std::string::npos) << r.out;
}

TEST(FrontDoor, ResumeTakesTheRecordedConfiguration) {
  TempDir dir;
  write_shards(dir);
  const std::string ck = dir.file("ck");
  const CmdResult first =
      run_tandem(tiny(dir) + " --max-steps 4 --lr 0.005 --batch-size 4 --checkpoint-dir " + ck + " --progress 0");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  // Only --resume: the recorded flags, not the defaults.
  const CmdResult again = run_tandem("train --resume " + ck + " --print-config");
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(value_line(again.out, "lr"), "lr = 0.005");
  EXPECT_EQ(value_line(again.out, "batch_size"), "batch_size = 4");
  EXPECT_EQ(value_line(again.out, "model"), "model = 'gpt2'");
  // Flags given anew that change the math: every one named in one refusal.
  const CmdResult differ = run_tandem("train --resume " + ck + " --lr 0.001 --seed 3 --max-steps 6");
  EXPECT_EQ(differ.exit_code, 2) << differ.out;
  EXPECT_NE(differ.out.find("--lr 0.001 (given or its default) differs from the checkpoint's 0.005"),
            std::string::npos)
      << differ.out;
  EXPECT_NE(differ.out.find("--seed 3 (given or its default) differs from the checkpoint's 1"), std::string::npos)
      << differ.out;
}

}  // namespace
}  // namespace tandem
