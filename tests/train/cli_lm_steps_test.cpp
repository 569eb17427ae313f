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

}  // namespace
}  // namespace tandem
