// fp16 with dynamic loss scaling on token data (a GPT): matmuls and activations in f16, the
// loss, LayerNorm statistics and softmax in f32, f32 master weights; the loss gradient is
// scaled in the fused classifier before it is rounded to f16 (ops::classifier_cross_entropy's
// grad_scale). Checked against the f32 run of the same model within a tolerance, beside the
// CPU optimizer and the delayed update; and clipping with the CPU optimizer (its checks on the
// host after speculative updates) gives the on-device optimizer's bits in f32.
// The data and model: cli_lm_steps_test.cpp's (a 2-layer GPT-2 of width 32 on 64 tokens).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "data/temp_dir.h"
#include "tandem/data/token_shard.h"
#include "train/run_tandem.h"

namespace tandem {
namespace {

using testing::run_tandem;
using testing::TempDir;

const std::string kInit = TANDEM_SOURCE_DIR "/tests/golden/gpt2_hf_init.safetensors";

void write_shards(const TempDir& dir) {
  std::vector<uint32_t> train, val;
  for (uint32_t i = 0; i < 1064; ++i) train.push_back((i * 7 + i / 13) % 64);
  for (uint32_t i = 5000; i < 5132; ++i) val.push_back((i * 7 + i / 13) % 64);
  data::write_token_shard(dir.file("train.tok"), train, 64);
  data::write_token_shard(dir.file("val.tok"), val, 64);
}

std::string flags(const TempDir& dir) {
  return "train --model gpt2 --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --data " + dir.str() + " --init " +
         kInit + " --batch-size 4 --eval-batch-size 4 --max-steps 20 --warmup-steps 2 --lr 3e-3 --device virt:0 "
                 "--threads 1 --num-workers 0 --progress 0";
}

// The epoch line's test loss ("test_loss X" or "test loss X").
double test_loss(const std::string& out) {
  std::smatch m;
  const std::regex re("test[_ ]loss[ =:]*([0-9.]+)");
  std::string last;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    last = (*it)[1];
  return last.empty() ? NAN : std::stod(last);
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(CliLmFp16, TrainsLikeF32WithinATolerance) {
  TempDir dir;
  write_shards(dir);
  const auto f32 = run_tandem(flags(dir));
  ASSERT_EQ(f32.exit_code, 0) << f32.out;
  const double ref = test_loss(f32.out);
  ASSERT_TRUE(std::isfinite(ref)) << f32.out;
  for (const std::string extra : {"", " --optimizer-device cpu", " --optimizer-device cpu --offload-delay 1",
                                  " --clip-grad-norm 1", " --optimizer-device cpu --clip-grad-norm 1",
                                  " --param-device cpu", " --param-device cpu --offload-delay 1 --clip-grad-norm 1"}) {
    const auto r = run_tandem(flags(dir) + " --precision fp16" + extra);
    ASSERT_EQ(r.exit_code, 0) << extra << "\n" << r.out;
    EXPECT_NE(r.out.find("loss_scale 65536 skipped 0"), std::string::npos) << extra << "\n" << r.out;
    // f16 activations (11-bit mantissas) over 20 steps: within 2% of the f32 run's test loss.
    EXPECT_NEAR(test_loss(r.out), ref, 0.02 * ref) << extra << "\n" << r.out;
  }
}

TEST(CliLmFp16, ClippingWithTheCpuOptimizerGivesTheDeviceBits) {
  TempDir dir;
  write_shards(dir);
  // A small bound: clipping bites on some steps (the norm falls below it as the loss drops).
  const std::string base = flags(dir) + " --clip-grad-norm 0.5 --save ";
  const auto dev = run_tandem(base + dir.file("dev.st"));
  ASSERT_EQ(dev.exit_code, 0) << dev.out;
  const auto cpu = run_tandem(base + dir.file("cpu.st") + " --optimizer-device cpu --bucket-cap-mb 0.01");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.out;
  EXPECT_GT(bytes_of(dir.file("dev.st")).size(), 1000u);
  EXPECT_TRUE(bytes_of(dir.file("dev.st")) == bytes_of(dir.file("cpu.st")));
  const auto plain = run_tandem(flags(dir) + " --save " + dir.file("plain.st"));
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_FALSE(bytes_of(dir.file("dev.st")) == bytes_of(dir.file("plain.st"))) << "the bound never bit";
  // Streamed parameters: their per-block host updates give the same bits.
  const auto streamed = run_tandem(base + dir.file("stream.st") + " --param-device cpu");
  ASSERT_EQ(streamed.exit_code, 0) << streamed.out;
  EXPECT_TRUE(bytes_of(dir.file("dev.st")) == bytes_of(dir.file("stream.st")));
  // The delayed update clips too, the CPU optimizer's and the streamer's alike.
  const auto delayed = run_tandem(base + dir.file("delay.st") + " --optimizer-device cpu --offload-delay 1");
  ASSERT_EQ(delayed.exit_code, 0) << delayed.out;
  const auto delayed_stream = run_tandem(base + dir.file("delay_stream.st") + " --param-device cpu --offload-delay 1");
  ASSERT_EQ(delayed_stream.exit_code, 0) << delayed_stream.out;
  EXPECT_TRUE(bytes_of(dir.file("delay.st")) == bytes_of(dir.file("delay_stream.st")));
  EXPECT_FALSE(bytes_of(dir.file("delay.st")) == bytes_of(dir.file("cpu.st")));
}

}  // namespace
}  // namespace tandem
