// `tandem train` on token data: --data a folder with train.tok and val.tok, --model gpt-mini
// (6 layers, 6 heads, 384 wide, block 256), trained through its fused loss.
// The data: a sequence over 64 ids that follows a rule (id i is (7 i + i / 13) mod 64), so a
// model can learn it. Figures asserted:
//  - the window counts: floor((5000 - 1) / 256) = 19 training and floor((1000 - 1) / 256) = 3
//    test samples;
//  - learning: after 2 epochs (8 steps of 4 windows, AdamW lr 1e-3) the test loss is below
//    2.0 nats per token, where GPT-2's initialisation starts at about ln 64 = 4.16 (logits of
//    standard deviation about 0.02 sqrt(384) = 0.4 add about 0.08); 2.0 leaves a wide margin
//    under the 0.8 seen here, and is far from what an untrained model gives;
//  - the banner names the token data; samples/s counts windows and tokens/s 256 times that.
// Bad input gets one line naming the flag or the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "data/temp_dir.h"
#include "tandem/data/token_shard.h"
#include "train/run_tandem.h"

namespace tandem {
namespace {

using testing::run_tandem;
using testing::TempDir;

void write_shards(const TempDir& dir, bool with_val = true) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 6000; ++i) ids.push_back((i * 7 + i / 13) % 64);
  data::write_token_shard(dir.file("train.tok"), std::vector<uint32_t>(ids.begin(), ids.begin() + 5000), 64);
  if (with_val) data::write_token_shard(dir.file("val.tok"), std::vector<uint32_t>(ids.begin() + 5000, ids.end()), 64);
}

// The test_loss of each epoch line.
std::vector<double> test_losses(const std::string& out) {
  std::vector<double> v;
  const std::regex re("epoch \\d+/\\d+ .* test_loss ([0-9.]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    v.push_back(std::stod((*it)[1].str()));
  return v;
}

TEST(CliLm, GptMiniLearnsTokenData) {
  TempDir dir;
  write_shards(dir);
  const auto r = run_tandem("train --model gpt-mini --data " + dir.str() +
                            " --epochs 2 --batch-size 4 --eval-batch-size 4 --lr 1e-3 --optimizer adamw");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("model gpt-mini (10770432 parameters)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("19 train / 3 test samples"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("data: token shards (train.tok, val.tok), a vocabulary of 64 tokens, windows of 256 tokens"),
            std::string::npos)
      << r.out;
  // Samples are windows: the rates differ by T = 256 (the samples' rate is printed rounded).
  std::smatch rate;
  ASSERT_TRUE(std::regex_search(r.out, rate, std::regex("done: .* train ([0-9]+) samples/s, ([0-9]+) tokens/s")))
      << r.out;
  EXPECT_LE(std::fabs(std::stod(rate[2].str()) / 256.0 - std::stod(rate[1].str())), 0.5) << r.out;
  const std::vector<double> losses = test_losses(r.out);
  ASSERT_EQ(losses.size(), 2u) << r.out;
  EXPECT_LT(losses[1], 2.0) << r.out;
  EXPECT_LT(losses[1], losses[0]) << r.out;
}

// The figures of each epoch line (losses and accuracies, not the rates and times).
std::vector<std::string> epoch_figures(const std::string& out) {
  std::vector<std::string> v;
  const std::regex re("(epoch \\d+/\\d+ +train_loss .* test_acc [0-9.]+%)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    v.push_back((*it)[1].str());
  return v;
}

// A run resumed from a mid-epoch checkpoint (step 6 of 8: epoch 2, batch 2 of 4) ends with the
// uninterrupted run's epoch figures: the windows are keyed by (seed, epoch, index) and the
// optimizer state and partial sums are in the checkpoint.
TEST(CliLm, MidEpochResumeGivesTheSameFigures) {
  TempDir dir, ck;
  write_shards(dir);
  const std::string flags = "train --model gpt-mini --data " + dir.str() +
                            " --epochs 2 --batch-size 4 --eval-batch-size 4 --checkpoint-every 2 --keep-checkpoints 9 "
                            "--checkpoint-dir " +
                            ck.str();
  const auto full = run_tandem(flags);
  ASSERT_EQ(full.exit_code, 0) << full.out;
  const auto resumed = run_tandem(flags + " --resume " + ck.file("step-0000000006.safetensors"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("epoch 2, step 2 of 4 (global step 6)"), std::string::npos) << resumed.out;
  const std::vector<std::string> a = epoch_figures(full.out), b = epoch_figures(resumed.out);
  ASSERT_EQ(a.size(), 2u) << full.out;
  ASSERT_EQ(b.size(), 1u) << resumed.out;
  EXPECT_EQ(a[1], b[0]);
}

// Any size by flags: 2 blocks, 2 heads, 32 wide, windows and positions of 64, 80 token rows
// (above the shards' 64). Parameters: wte 80*32 + wpe 64*32 + 2 blocks of 12*32^2 + 13*32
// (ln_1, c_attn, c_proj, ln_2, c_fc, mlp c_proj with their biases) + ln_f 2*32 = 30080, the
// lm_head tied to wte; windows floor(4999 / 64) = 78 and floor(999 / 64) = 15.
TEST(CliLm, SizesByFlags) {
  TempDir dir;
  write_shards(dir);
  const auto r = run_tandem("train --model gpt-mini --data " + dir.str() +
                            " --n-layer 2 --n-head 2 --n-embd 32 --block-size 64 --vocab-size 80 --epochs 1 "
                            "--batch-size 8 --eval-batch-size 8");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("model gpt-mini (30080 parameters)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("78 train / 15 test samples"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a vocabulary of 64 tokens, windows of 64 tokens"), std::string::npos) << r.out;
  const std::string base = "train --data " + dir.str() + " --epochs 1";
  const std::pair<std::string, std::string> bad[] = {
      {" --model mlp --n-layer 2",
       "[train] --n-layer 2: only for a sequence model (--model gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt-mini), "
       "not mlp"},
      {" --model gpt-mini --n-head 5", "[train] --n-head 5 --n-embd 384: expected the heads to divide the width"},
      {" --model gpt-mini --n-embd -3", "[train] --n-embd: expected 0 (the model's) or 1..16777216, got -3"},
      {" --model gpt-mini --vocab-size 10",
       "[train] --vocab-size 10: expected at least the token shards' vocabulary of 64"},
  };
  for (const auto& [flags, want] : bad) {
    const auto e = run_tandem(base + flags);
    EXPECT_EQ(e.exit_code, 2) << flags << "\n" << e.out;
    EXPECT_NE(e.out.find(want), std::string::npos) << flags << "\n" << e.out;
  }
}

// --devices/--split on token data: the windows of each batch split between virt:0 and the
// cpu (fixed halves and by measured speed) give the one-device run's test losses, up to the
// order of the float additions in the combined gradient (1e-3 nats here, where the losses
// move by more than 0.1 per epoch).
TEST(CliLm, SplitBetweenDevicesGivesTheOneDeviceLosses) {
  TempDir dir;
  write_shards(dir);
  const std::string base = "train --model gpt2 --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --data " +
                           dir.str() + " --epochs 2 --batch-size 16 --threads 1 --progress 0 --seed 5";
  const auto one = run_tandem(base + " --device cpu");
  ASSERT_EQ(one.exit_code, 0) << one.out;
  const std::vector<double> want = test_losses(one.out);
  ASSERT_EQ(want.size(), 2u) << one.out;
  EXPECT_LT(want[1], want[0] - 0.1) << one.out;
  for (const char* split : {"--devices virt:0,cpu --split 0.5,0.5", "--devices virt:0,cpu --split auto"}) {
    const auto r = run_tandem(base + " " + split);
    ASSERT_EQ(r.exit_code, 0) << split << "\n" << r.out;
    const std::vector<double> got = test_losses(r.out);
    ASSERT_EQ(got.size(), 2u) << r.out;
    for (size_t e = 0; e < 2; ++e) EXPECT_NEAR(got[e], want[e], 1e-3) << split << " epoch " << e + 1 << "\n" << r.out;
    EXPECT_NE(r.out.find("split: virt:0 "), std::string::npos) << r.out;
  }
}

// --place on a GPT: blocks on virt:0, the cpu and virt:1 give the one-device run's weights
// bit for bit (virt runs the cpu kernels; the boundaries only copy), also after a resume
// from a placed run's checkpoint. The banner says where each block runs.
TEST(CliLm, PlacedBlocksGiveTheOneDeviceWeights) {
  TempDir dir;
  write_shards(dir);
  const std::string base = "train --model gpt2 --n-layer 4 --n-head 2 --n-embd 32 --block-size 32 --data " +
                           dir.str() + " --batch-size 16 --threads 1 --progress 0 --seed 5 --schedule constant";
  const auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  ASSERT_EQ(run_tandem(base + " --epochs 2 --device virt:0 --save " + dir.file("one.st")).exit_code, 0);
  const std::string one = bytes(dir.file("one.st"));
  ASSERT_GT(one.size(), 4u * 53952);
  const auto placed = run_tandem(base + " --epochs 2 --device virt:0 --place transformer.h.1=cpu,transformer.h.3=virt:1 "
                                 "--save " + dir.file("placed.st"));
  ASSERT_EQ(placed.exit_code, 0) << placed.out;
  EXPECT_NE(placed.out.find("placement: modules transformer.h.0 on virt:0, transformer.h.1..transformer.h.2 on cpu, "
                            "transformer.h.3 on virt:1 (embedding, ln_f and lm_head on virt:0)"),
            std::string::npos)
      << placed.out;
  EXPECT_TRUE(bytes(dir.file("placed.st")) == one) << "placed weights differ from the one-device run's";
  // One epoch with checkpoints, then the second resumed (--force: --epochs differs).
  const std::string place = " --device virt:0 --place transformer.h.2=cpu --checkpoint-dir " + dir.file("ck");
  ASSERT_EQ(run_tandem(base + " --epochs 1" + place).exit_code, 0);
  const auto resumed = run_tandem(base + " --epochs 2" + place + " --resume --force --save " + dir.file("resumed.st"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resumed from "), std::string::npos) << resumed.out;
  EXPECT_TRUE(bytes(dir.file("resumed.st")) == one) << "resumed placed weights differ from the one-device run's";
}

// A --max-steps run that ends inside an epoch (12 steps of 9 per epoch) checkpoints the
// position it reached, epoch 2 step 3, not the start of epoch 3: --resume of the folder
// continues there (nothing left to train) and ends with the same validation loss.
TEST(CliLm, MaxStepsEndingMidEpochCheckpointsItsPosition) {
  TempDir dir;
  write_shards(dir);
  const std::string run = "train --model gpt2 --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --data " +
                          dir.str() + " --batch-size 16 --threads 1 --progress 0 --device virt:0 --max-steps 12 "
                          "--warmup-steps 2 --checkpoint-dir " + dir.file("ck");
  const auto first = run_tandem(run);
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_NE(first.out.find("step-0000000012.safetensors: epoch 2 step 3/9 (global step 12)"), std::string::npos)
      << first.out;
  std::ifstream latest(dir.file("ck/latest.json"));
  const std::string json((std::istreambuf_iterator<char>(latest)), {});
  EXPECT_NE(json.find("\"epoch\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"step\": 3"), std::string::npos) << json;
  const auto resumed = run_tandem(run + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resumed from " + dir.file("ck/step-0000000012.safetensors") +
                             ": epoch 2, step 3 of 9 (global step 12)"),
            std::string::npos)
      << resumed.out;
  std::smatch a, b;
  const std::regex done(R"(done: final val_loss ([0-9.]+),)");
  ASSERT_TRUE(std::regex_search(first.out, a, done)) << first.out;
  ASSERT_TRUE(std::regex_search(resumed.out, b, done)) << resumed.out;
  EXPECT_EQ(a[1].str(), b[1].str());
}

// Resuming a run whose last checkpoint is its end trains nothing, says why, and still writes
// --save: the checkpoint's weights, the bytes the first run saved.
TEST(CliLm, ResumedAtTheEndStillSaves) {
  TempDir dir;
  write_shards(dir);
  const std::string run = "train --model gpt2 --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --data " +
                          dir.str() + " --batch-size 16 --threads 1 --progress 0 --device virt:0 --max-steps 4 "
                          "--checkpoint-every 2 --checkpoint-dir " + dir.file("ck");
  const auto first = run_tandem(run + " --save " + dir.file("a.st"));
  ASSERT_EQ(first.exit_code, 0) << first.out;
  const auto resumed = run_tandem(run + " --resume --save " + dir.file("b.st"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("done: nothing left to train (the checkpoint is at the run's end, --max-steps 4)"),
            std::string::npos)
      << resumed.out;
  std::ifstream a(dir.file("a.st"), std::ios::binary), b(dir.file("b.st"), std::ios::binary);
  const std::string wa((std::istreambuf_iterator<char>(a)), {}), wb((std::istreambuf_iterator<char>(b)), {});
  EXPECT_GT(wa.size(), 1000u);
  EXPECT_TRUE(wa == wb) << "the resumed run's --save differs from the first run's";
}

TEST(CliLm, BadInputIsOneLineNamingIt) {
  TempDir dir;
  write_shards(dir);
  auto r = run_tandem("train --model resnet18 --data " + dir.str());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("[train] --model resnet18: --data " + dir.str() +
                       " holds token data, which needs a sequence model (expected one of gpt2, gpt2-medium, "
                       "gpt2-large, gpt2-xl, gpt-mini)"),
            std::string::npos)
      << r.out;
  // The other way round: a language model on a folder without token shards is told so.
  std::filesystem::create_directory(dir.file("images"));
  r = run_tandem("train --model gpt-mini --max-steps 1 --data " + dir.file("images"));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(r.out, "tandem: error: [train] --data " + dir.file("images") +
                       ": no train.tok in it: model gpt-mini is a language model and expects token shards "
                       "(tandem tokenize --corpus FILE --out DIR writes them; docs/language-models.md)\n");
  // --place names blocks only, in order; the rest of a GPT stays on --device.
  for (const auto& [place, want] : std::vector<std::pair<std::string, std::string>>{
           {"transformer.ln_f=virt:0",
            "--place transformer.ln_f=virt:0: 'transformer.ln_f' names no block of this GPT; expected "
            "transformer.h.0..transformer.h.5 (the embedding, ln_f and the tied lm_head stay on --device cpu)"},
           {"transformer.h.6=virt:0", "'transformer.h.6' names no block of this GPT"},
           {"transformer.h.01=virt:0", "'transformer.h.01' names no block of this GPT"},
           {"transformer.h.1.attn=virt:0",
            "'transformer.h.1.attn' lies inside block transformer.h.1; a GPT is placed by whole blocks, expected "
            "transformer.h.0..transformer.h.5"},
           {"transformer.h.3=virt:0,transformer.h.1=cpu",
            "block transformer.h.1 is listed out of order or twice; expected blocks in the model's order"},
           {"transformer.h.3=gpu", "--place transformer.h.3=gpu: [device] unknown device 'gpu'"}}) {
    r = run_tandem("train --model gpt-mini --data " + dir.str() + " --place " + place);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("tandem: error: [train] "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << place << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  }
  TempDir no_val;
  write_shards(no_val, false);
  r = run_tandem("train --model gpt-mini --data " + no_val.str());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find(no_val.file("val.tok")), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tandem
