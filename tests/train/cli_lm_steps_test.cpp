// `tandem train` on token data with a GPT-2 of any size, weights from and for transformers'
// GPT2LMHeadModel, and runs counted in optimizer steps.
// The model: tests/golden/gpt2_hf_init.safetensors, the model.safetensors that transformers'
// save_pretrained wrote for a random GPT-2 (vocabulary 64, 32 positions, 32 wide, 2 layers, 2
// heads; scripts/golden_gpt2_hf.py), with the mean cross-entropy it gives on one validation
// window in tests/golden/gpt2_hf_init.txt. The data: ids[i] = (7 i + i / 13) mod 64 as in
// cli_lm_test.cpp; train.tok holds ids[0, 264) (floor(263 / 32) = 8 windows), val.tok the 33
// tokens ids[5000, 5033) (a shard of block_size + 1 tokens: the one window the script scores).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "data/temp_dir.h"
#include "tandem/data/token_shard.h"
#include "tandem/safetensors.h"
#include "train/run_tandem.h"

namespace tandem {
namespace {

using testing::run_tandem;
using testing::TempDir;

const std::string kInit = TANDEM_SOURCE_DIR "/tests/golden/gpt2_hf_init.safetensors";
const std::string kSizes = " --model gpt2 --n-layer 2 --n-head 2 --n-embd 32 --block-size 32";

uint32_t id_at(uint32_t i) {
  return (i * 7 + i / 13) % 64;
}

void write_shards(const TempDir& dir) {
  std::vector<uint32_t> train, val;
  for (uint32_t i = 0; i < 264; ++i) train.push_back(id_at(i));
  for (uint32_t i = 5000; i < 5033; ++i) val.push_back(id_at(i));
  data::write_token_shard(dir.file("train.tok"), train, 64);
  data::write_token_shard(dir.file("val.tok"), val, 64);
}

double golden_val_loss() {
  std::ifstream in(TANDEM_SOURCE_DIR "/tests/golden/gpt2_hf_init.txt");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("val_loss ", 0) == 0) return std::stod(line.substr(9));
  ADD_FAILURE() << "no val_loss in gpt2_hf_init.txt";
  return NAN;
}

// The "eval" records of a --metrics-file: global_step -> val_loss.
std::vector<std::pair<int64_t, double>> evals(const std::string& path) {
  std::vector<std::pair<int64_t, double>> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("type", "") == "eval")
      out.emplace_back(j["global_step"].get<int64_t>(), j["val_loss"].get<double>());
  }
  return out;
}

std::string train_flags(const TempDir& dir) {
  return "train" + kSizes + " --data " + dir.str() +
         " --eval-batch-size 1 --threads 1 --progress 0 --schedule constant";
}

// --init of a transformers-saved GPT-2 (no lm_head.weight in the file: save_pretrained drops
// the tied copy): the validation loss before the first step is transformers' to f32 rounding
// (32 rows of a 64-way softmax summed in f32: 1e-5 is about 100 float ulps of 4.8).
TEST(CliLmSteps, TransformersInitGivesTransformersLoss) {
  TempDir dir;
  write_shards(dir);
  const auto r = run_tandem(train_flags(dir) + " --init " + kInit +
                            " --max-steps 2 --eval-interval 1 --batch-size 2" + " --metrics-file " +
                            dir.file("m.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto e = evals(dir.file("m.jsonl"));
  ASSERT_EQ(e.size(), 3u) << r.out;  // steps 0, 1, 2
  EXPECT_EQ(e[0].first, 0);
  EXPECT_EQ(e[2].first, 2);
  EXPECT_NEAR(e[0].second, golden_val_loss(), 1e-5) << r.out;
  EXPECT_NE(e[1].second, e[0].second);  // it trained
  EXPECT_NE(r.out.find("step 0: val_loss 4.8092"), std::string::npos) << r.out;
  // A step-counted run's lines: "epoch 1" (no total of epochs) and the final validation loss.
  EXPECT_NE(r.out.find("\nepoch 1  train_loss "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("\ndone: final val_loss {:.4f}, wall ", e[2].second)), std::string::npos)
      << r.out;
}

// --save writes lm_head.weight (a copy of transformer.wte.weight) and the GPT2Config sizes;
// the file goes back in through --init (the copy is checked against the source).
TEST(CliLmSteps, SaveWritesTheTiedHeadAndLoadsBack) {
  TempDir dir;
  write_shards(dir);
  const std::string w = dir.file("w.safetensors");
  auto r = run_tandem(train_flags(dir) + " --init " + kInit +
                      " --max-steps 1 --batch-size 2 --save " + w);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::map<std::string, std::string> meta;
  const NamedTensors saved = load_safetensors(w, &meta);
  EXPECT_EQ(saved.size(), 29u);  // transformers' 28 and lm_head.weight
  const Tensor& head = find_tensor(saved, "lm_head.weight", w);
  const Tensor& wte = find_tensor(saved, "transformer.wte.weight", w);
  ASSERT_EQ(head.shape(), Shape({64, 32}));
  EXPECT_EQ(0, std::memcmp(head.raw_data(), wte.raw_data(), wte.nbytes()));
  EXPECT_EQ(meta["n_layer"], "2");
  EXPECT_EQ(meta["n_head"], "2");
  EXPECT_EQ(meta["n_embd"], "32");
  EXPECT_EQ(meta["n_positions"], "32");
  EXPECT_EQ(meta["vocab_size"], "64");
  EXPECT_EQ(meta.count("sample_shape"), 0u);
  r = run_tandem(train_flags(dir) + " --init " + w + " --max-steps 1 --batch-size 2");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

// A tandem --save of this GPT loads into GPT2LMHeadModel with strict=True, through
// from_pretrained too, with the same logits, and gives tandem's validation loss
// (scripts/golden_gpt2_hf.py check). Needs PyTorch and transformers in /opt/peers.
TEST(CliLmSteps, SavedWeightsLoadInTransformersStrict) {
  if (std::system("/opt/peers/bin/python -c 'import transformers, safetensors' >/dev/null 2>&1") !=
      0)
    GTEST_SKIP() << "no /opt/peers/bin/python with transformers and safetensors";
  TempDir dir;
  write_shards(dir);
  const std::string w = dir.file("w.safetensors");
  const auto r = run_tandem(train_flags(dir) + " --init " + kInit +
                            " --max-steps 2 --eval-interval 2 --batch-size 2 " + "--save " + w +
                            " --metrics-file " + dir.file("m.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto e = evals(dir.file("m.jsonl"));
  ASSERT_EQ(e.size(), 2u) << r.out;
  const std::string cmd = "/opt/peers/bin/python " TANDEM_SOURCE_DIR
                          "/scripts/golden_gpt2_hf.py check " +
                          w + " " + fmt::format("{:.9f}", e[1].second) + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_EQ(::pclose(p), 0) << out;
  EXPECT_NE(out.find("ok: strict=True load of 29 tensors"), std::string::npos) << out;
}

// A file with one tensor left out, one of another shape, one of another dtype, or an
// lm_head.weight that is not wte's copy: one line naming the tensor.
TEST(CliLmSteps, BadInitFilesNameTheTensor) {
  TempDir dir;
  write_shards(dir);
  const NamedTensors good = load_safetensors(kInit);
  const auto variant = [&](const std::string& name, const auto& change) {
    NamedTensors t;
    for (const auto& [n, v] : good) {
      Tensor c = v;
      if (change(n, c)) t.emplace_back(n, c);
    }
    save_safetensors(dir.file(name), t);
    return run_tandem(train_flags(dir) + " --init " + dir.file(name) +
                      " --max-steps 1 --batch-size 2");
  };
  auto r = variant("missing.st",
                   [](const std::string& n, Tensor&) { return n != "transformer.h.1.ln_2.bias"; });
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("tensor 'transformer.h.1.ln_2.bias' [32] is not in the file"),
            std::string::npos)
      << r.out;
  r = variant("dtype.st", [](const std::string& n, Tensor& t) {
    if (n == "transformer.h.0.attn.c_proj.weight") t = t.to(DType::bf16);
    return true;
  });
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.out.find("tensor 'transformer.h.0.attn.c_proj.weight' is bf16 in the file, expected f32"),
      std::string::npos)
      << r.out;
  r = variant("head.st", [](const std::string&, Tensor&) { return true; });
  ASSERT_EQ(r.exit_code, 0) << r.out;  // the plain copy loads
  NamedTensors untied = good;
  untied.emplace_back("lm_head.weight", Tensor::zeros({64, 32}, DType::f32));
  save_safetensors(dir.file("untied.st"), untied);
  r = run_tandem(train_flags(dir) + " --init " + dir.file("untied.st") +
                 " --max-steps 1 --batch-size 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.out.find("tensor 'lm_head.weight' [64, 32] f32 differs from 'transformer.wte.weight'"),
      std::string::npos)
      << r.out;
  // Another width: every tensor's shape differs; the first one is named.
  r = run_tandem("train --model gpt2 --n-layer 2 --n-head 2 --n-embd 16 --block-size 32 --data " +
                 dir.str() + " --threads 1 --progress 0 --schedule constant --init " + kInit +
                 " --max-steps 1 --batch-size 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.out.find(
          "tensor 'transformer.wte.weight' has shape [64, 32] in the file, expected [64, 16]"),
      std::string::npos)
      << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

// The largest |a - b| over every tensor of two weight files (and of a and the golden start).
double max_diff(const NamedTensors& a, const NamedTensors& b) {
  double m = 0;
  for (const auto& [name, t] : a) {
    const Tensor x = t.to(DType::f32), y = find_tensor(b, name, "weights").to(DType::f32);
    for (int64_t i = 0; i < x.numel(); ++i)
      m = std::max(m, std::fabs(static_cast<double>(x.data<float>()[i]) - y.data<float>()[i]));
  }
  return m;
}

// --grad-accum-steps 2 of batch 2 takes the samples one step of batch 4 takes (sample i of an
// epoch is keyed by (seed, epoch, i), not by the batch), and the mean of the two micro-batches'
// mean losses is the mean over the 4 (every window counts 32 rows). So 3 SGD steps (crossing
// an epoch of 2 steps) end at the same weights up to f32 rounding: the sums run in another
// order (relative error about 1e-6 per gradient), so the runs may differ by 1e-4 of the
// largest change from the start; one step of batch 2 alone (the control) differs by far more.
TEST(CliLmSteps, GradAccumulationEqualsTheLargerBatch) {
  TempDir dir;
  write_shards(dir);
  const std::string flags =
      train_flags(dir) + " --init " + kInit +
      " --max-steps 3 --optimizer sgd --momentum 0 --weight-decay 0 --lr 0.5 --save ";
  auto r = run_tandem(flags + dir.file("accum.st") + " --batch-size 2 --grad-accum-steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = run_tandem(flags + dir.file("big.st") + " --batch-size 4");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = run_tandem(flags + dir.file("small.st") + " --batch-size 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  NamedTensors start = load_safetensors(kInit), accum = load_safetensors(dir.file("accum.st")),
               big = load_safetensors(dir.file("big.st")),
               small = load_safetensors(dir.file("small.st"));
  const double moved = max_diff(start, big);
  EXPECT_GT(moved, 1e-3);
  EXPECT_LE(max_diff(start, accum), 2 * moved);
  EXPECT_LE(max_diff(big, accum), 1e-4 * moved);
  EXPECT_GE(max_diff(big, small), 1e-2 * moved);
}

// A run of 6 steps of 2 micro-batches with an evaluation every 2 steps, resumed from the
// checkpoint after step 3 (the middle of epoch 2), saves the same bytes and evaluates alike.
TEST(CliLmSteps, ResumeMidRunIsBitExact) {
  TempDir dir, ck;
  write_shards(dir);
  const std::string flags =
      train_flags(dir) + " --init " + kInit +
      " --max-steps 6 --grad-accum-steps 2 --batch-size 2 --eval-interval 2 --checkpoint-every 1 "
      "--keep-checkpoints 9 --checkpoint-dir " +
      ck.str();
  auto full = run_tandem(flags + " --save " + dir.file("full.st") + " --metrics-file " +
                         dir.file("full.jsonl"));
  ASSERT_EQ(full.exit_code, 0) << full.out;
  auto resumed =
      run_tandem(flags + " --save " + dir.file("resumed.st") + " --metrics-file " +
                 dir.file("resumed.jsonl") + " --resume " + ck.file("step-0000000003.safetensors"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("epoch 2, step 1 of 2 (global step 3)"), std::string::npos)
      << resumed.out;
  const auto bytes = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytes(dir.file("full.st")), bytes(dir.file("resumed.st")));
  const auto a = evals(dir.file("full.jsonl")), b = evals(dir.file("resumed.jsonl"));
  ASSERT_EQ(a.size(), 4u) << full.out;  // steps 0, 2, 4, 6
  ASSERT_EQ(b.size(), 2u) << resumed.out;
  EXPECT_EQ(a[2], b[0]);
  EXPECT_EQ(a[3], b[1]);
}

TEST(CliLmSteps, BadStepFlagsAreOneLineNamingThem) {
  TempDir dir;
  write_shards(dir);
  const std::string base = train_flags(dir) + " --batch-size 2";
  const std::pair<std::string, std::string> cases[] = {
      {" --grad-accum-steps 0", "--grad-accum-steps: expected an integer in 1..65536"},
      {" --max-steps -1", "--max-steps: expected an integer >= 0"},
      {" --eval-interval -2", "--eval-interval: expected an integer >= 0"},
      {" --grad-accum-steps 5",
       "--grad-accum-steps 5: expected at most the 4 training batches of an epoch"},
      {" --warmup-steps -2", "--warmup-steps: expected an integer >= 0 (optimizer steps), got -2"}};
  for (const auto& [flags, message] : cases) {
    const auto r = run_tandem(base + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << flags << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  }
}

// --warmup-steps counts the cosine schedule's warmup in optimizer steps, for runs given in
// --max-steps (where --warmup-epochs, a share of an epoch, fits badly): lr (s + 1) / W for the
// first W steps, then cosine to 0 (optim/schedule.h), as the "lr" of each step's record.
TEST(CliLmSteps, WarmupStepsRampsTheCosineSchedule) {
  TempDir dir;
  write_shards(dir);
  const std::string base = "train" + kSizes + " --data " + dir.str() +
                           " --eval-batch-size 1 --threads 1 --progress 0 --batch-size 2 --schedule cosine "
                           "--lr 0.1 --log-interval 1 --max-steps 6";
  const auto r = run_tandem(base + " --warmup-steps 2 --metrics-file " + dir.file("m.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::vector<double> lr;
  std::ifstream in(dir.file("m.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("type", "") == "window") lr.push_back(j["lr"].get<double>());
  }
  ASSERT_EQ(lr.size(), 6u) << r.out;
  const double pi = std::acos(-1.0);
  for (int s = 0; s < 6; ++s) {
    const double want = s < 2 ? 0.1 * (s + 1) / 2 : 0.05 * (1 + std::cos(pi * (s - 2) / 4.0));
    EXPECT_NEAR(lr[s], want, 1e-9) << "step " << s;
  }
  const auto too_long = run_tandem(base + " --warmup-steps 6");
  EXPECT_EQ(too_long.exit_code, 2) << too_long.out;
  EXPECT_NE(too_long.out.find("--warmup-steps 6: expected fewer warmup steps than the run's 6 steps"),
            std::string::npos)
      << too_long.out;
}

}  // namespace
}  // namespace tandem
