// `tandem generate` end to end. With transformers' random GPT-2 (tests/golden/
// gpt2_hf_init.safetensors, --n-head 2) and --prompt-ids it prints the prompt and transformers'
// greedy tokens (tests/golden/gpt2_hf_generate.safetensors); the same seed prints the same
// ids, another seed others, --top-k 1 the greedy ones. A model trained for a few steps on a
// tokenized corpus and saved prints text after a text prompt, its tokenizer found through the
// weights' metadata. Bad input is one line "tandem: error: [generate] ..." and exit code 2
// (tandem's code for bad usage or input, tools/main.cpp), before any output.
#include <gtest/gtest.h>

#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "data/temp_dir.h"
#include "data/text_corpus.h"
#include "tandem/safetensors.h"
#include "train/run_tandem.h"

namespace tandem {
namespace {

using testing::run_tandem;
using testing::TempDir;

const std::string kInit = TANDEM_SOURCE_DIR "/tests/golden/gpt2_hf_init.safetensors";
const std::string kGolden = TANDEM_SOURCE_DIR "/tests/golden/gpt2_hf_generate.safetensors";

std::string ids_text(const Tensor& t) {
  std::vector<int64_t> v(t.data<int64_t>(), t.data<int64_t>() + t.numel());
  return fmt::format("{}", fmt::join(v, ","));
}

// stdout only.
std::string generate(const std::string& flags) {
  const testing::CmdResult r =
      run_tandem("generate --weights " + kInit + " --n-head 2 --threads 1 " + flags, "2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << flags;
  return r.out;
}

TEST(CliGenerate, GreedyIdsAreTransformers) {
  const NamedTensors g = load_safetensors(kGolden);
  const std::string prompt = ids_text(find_tensor(g, "prompt", kGolden));
  const std::string want = ids_text(find_tensor(g, "tokens", kGolden));
  EXPECT_EQ(generate("--prompt-ids " + prompt + " --max-new-tokens 20 --temperature 0"),
            prompt + "," + want + "\n");
  EXPECT_EQ(generate("--prompt-ids " + prompt + " --max-new-tokens 20 --top-k 1 --seed 9"),
            prompt + "," + want + "\n");
  // The counts and speed on stderr.
  const testing::CmdResult r =
      run_tandem("generate --weights " + kInit + " --n-head 2 --threads 1 --prompt-ids " + prompt +
                 " --max-new-tokens 20 --temperature 0");
  EXPECT_NE(r.out.find("tandem generate: 7 prompt tokens, 20 new (max-new-tokens)"),
            std::string::npos)
      << r.out;
}

// transformers' save_pretrained folder: model.safetensors and config.json, whose n_head is used.
TEST(CliGenerate, NHeadFromConfigJsonBesideTheWeights) {
  TempDir dir;
  std::filesystem::copy_file(kInit, dir.file("model.safetensors"));
  std::ofstream(dir.file("config.json")) << R"({"model_type": "gpt2", "n_head": 2, "n_layer": 2})";
  const testing::CmdResult r = run_tandem("generate --weights " + dir.file("model.safetensors") +
                                              " --threads 1 --prompt-ids 1,2 --max-new-tokens 4 --temperature 0",
                                          "2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, generate("--prompt-ids 1,2 --max-new-tokens 4 --temperature 0"));
}

TEST(CliGenerate, SameSeedSameIdsOtherSeedOthers) {
  const std::string flags =
      "--prompt-ids 1,2,3 --max-new-tokens 25 --temperature 1 --top-k 0 --seed ";
  const std::string a = generate(flags + "4");
  ASSERT_EQ(std::count(a.begin(), a.end(), ','), 27) << a;  // 28 ids
  EXPECT_EQ(generate(flags + "4"), a);
  EXPECT_NE(generate(flags + "5"), a);
}

// A nucleus this small holds only the most likely token: the greedy ids, whatever the seed; the
// whole nucleus (1) is the plain sampling of the same seed.
TEST(CliGenerate, TopPNarrowsToGreedyAndOneChangesNothing) {
  const std::string prompt = "--prompt-ids 1,2,3 --max-new-tokens 25 ";
  const std::string greedy = generate(prompt + "--temperature 0");
  EXPECT_EQ(generate(prompt + "--temperature 1 --top-k 0 --top-p 1e-6 --seed 4"), greedy);
  EXPECT_EQ(generate(prompt + "--temperature 1 --top-k 0 --top-p 1 --seed 4"),
            generate(prompt + "--temperature 1 --top-k 0 --seed 4"));
}

// One line on stderr, exit code 2, nothing on stdout.
void expect_refused(const std::string& args, const std::string& message) {
  const testing::CmdResult all = run_tandem("generate " + args);
  EXPECT_EQ(all.exit_code, 2) << args << ": " << all.out;
  EXPECT_EQ(all.out, "tandem: error: " + message + "\n") << args;
  EXPECT_EQ(run_tandem("generate " + args, "2>/dev/null").out, "") << args;
}

// Weights holding NaN would pick token 0 for ever and exit 0: refused, naming the tensor.
TEST(CliGenerate, NonFiniteWeightsAreRefused) {
  TempDir dir;
  NamedTensors w = load_safetensors(kInit);
  bool found = false;
  for (auto& [name, t] : w)
    if (name.size() >= 10 && name.compare(name.size() - 10, 10, "wte.weight") == 0 && t.dtype() == DType::f32) {
      t.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
      found = true;
    }
  ASSERT_TRUE(found) << "no wte.weight in " << kInit;
  save_safetensors(dir.file("nan.safetensors"), w);
  const testing::CmdResult r =
      run_tandem("generate --weights " + dir.file("nan.safetensors") + " --n-head 2 --prompt-ids 1,2 --ids");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  EXPECT_NE(r.out.find("holds NaN at element 0: expected finite weights"), std::string::npos) << r.out;
}

TEST(CliGenerate, BadInputIsOneLineAndExitCode2) {
  TempDir dir;
  const std::string w = " --weights " + kInit + " --n-head 2";
  expect_refused(w + " --prompt-ids 1,64",
                 "[generate] prompt token 64 at position 1 is outside the model's "
                 "vocabulary [0, 64)");
  expect_refused(w + " --prompt-ids 1,x",
                 "[generate] --prompt-ids '1,x': expected token ids separated by commas, "
                 "e.g. 1,2,3");
  expect_refused(w + " --prompt-ids 1 --max-new-tokens -1",
                 "[generate] --max-new-tokens -1: expected an integer >= 0");
  expect_refused(w + " --prompt-ids 1 --temperature -1",
                 "[generate] --temperature -1: expected a number >= 0 (0 = greedy)");
  expect_refused(w + " --prompt-ids 1 --top-k -3",
                 "[generate] --top-k -3: expected an integer >= 0 (0 = every token)");
  expect_refused(w + " --prompt-ids 1 --top-p 0",
                 "[generate] --top-p 0: expected a number in (0, 1] (1 = every token)");
  expect_refused(w + " --prompt-ids 1 --top-p 1.5",
                 "[generate] --top-p 1.5: expected a number in (0, 1] (1 = every token)");
  expect_refused(
      w + " --prompt-ids 1,2 --max-new-tokens 31",
      "[generate] a prompt of 2 tokens and --max-new-tokens 31 pass the model's 32 positions "
      "(n_positions): expected --max-new-tokens at most 30");
  expect_refused(
      w, "[generate] expected exactly one of --prompt TEXT and --prompt-ids IDS, got neither");
  expect_refused(w + " --prompt hello --prompt-ids 1",
                 "[generate] expected exactly one of --prompt TEXT and --prompt-ids IDS, got both");
  expect_refused(
      w + " --prompt hello",
      "[generate] --prompt needs the model's tokenizer.model and none was found (not recorded in " +
          kInit + " nor beside it): pass --tokenizer FILE or --data DIR, or give --prompt-ids");
  expect_refused(w + " --prompt ''",
                 "--prompt: expected a value, got an empty string (see tandem generate --help)");
  expect_refused(" --weights " + kInit + " --prompt-ids 1",
                 "[generate] " + kInit +
                     " records no n_head (GPT2Config): give --n-head H, or put transformers' config.json beside the file");
  const std::string missing = dir.file("missing.safetensors");
  const testing::CmdResult m = run_tandem("generate --weights " + missing + " --prompt-ids 1");
  EXPECT_EQ(m.exit_code, 2) << m.out;
  EXPECT_EQ(m.out.find('\n'), m.out.size() - 1) << m.out;
  EXPECT_NE(m.out.find(missing), std::string::npos) << m.out;
  std::ofstream(dir.file("corrupt.safetensors")) << "not a safetensors file at all";
  const testing::CmdResult c =
      run_tandem("generate --weights " + dir.file("corrupt.safetensors") + " --prompt-ids 1");
  EXPECT_EQ(c.exit_code, 2) << c.out;
  EXPECT_EQ(c.out.find('\n'), c.out.size() - 1) << c.out;
  EXPECT_EQ(c.out.rfind("tandem: error: [safetensors] " + dir.file("corrupt.safetensors"), 0), 0u)
      << c.out;
  // Weights of an image classifier, and a file without GPT tensors.
  save_safetensors(dir.file("mlp.safetensors"), {{"1.weight", Tensor::zeros({4, 4})}},
                   {{"model", "mlp"}});
  expect_refused(
      " --weights " + dir.file("mlp.safetensors") + " --prompt-ids 1",
      "[generate] " + dir.file("mlp.safetensors") +
          " holds weights of model 'mlp', which is not a GPT: expected one of gpt2, gpt2-medium, "
          "gpt2-large, gpt2-xl, gpt-mini");
  save_safetensors(dir.file("other.safetensors"), {{"fc.weight", Tensor::zeros({4, 4})}});
  expect_refused(" --weights " + dir.file("other.safetensors") + " --prompt-ids 1",
                 "[generate] " + dir.file("other.safetensors") +
                     " holds no tensor 'transformer.wte.weight': expected GPT-2 weights with "
                     "GPT2LMHeadModel's names");
  expect_refused(w + " --prompt-ids 1 --data " + dir.str(),
                 "[generate] --data " + dir.str() +
                     ": no tokenizer.model in it (expected a folder written by tandem "
                     "tokenize)");
}

std::string corpus(int lines) { return testing::word_corpus(lines, 7); }

// Tokenize, train a small GPT a few steps with --save, generate text: the tokenizer comes
// from the weights' metadata (or --data), the text starts with the prompt and goes on.
TEST(CliGenerate, TrainedModelPrintsText) {
  TempDir dir;
  std::ofstream(dir.file("corpus.txt")) << corpus(900);
  const std::string tok = dir.file("tok");
  auto r = run_tandem("tokenize --corpus " + dir.file("corpus.txt") + " --out " + tok +
                      " --vocab-size 300");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string w = dir.file("lm.safetensors");
  r = run_tandem(
      "train --model gpt-mini --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --data " + tok +
      " --max-steps 20 --batch-size 8 --lr 3e-3 --threads 1 --progress 0 --save " + w);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::map<std::string, std::string> meta;
  load_safetensors(w, &meta);
  EXPECT_EQ(meta["tokenizer"],
            std::filesystem::path(tok + "/tokenizer.model").lexically_normal().string());
  const std::string flags =
      " --prompt 'the quick brown' --max-new-tokens 12 --seed 3 --threads 1 --ignore-eos";
  r = run_tandem("generate --weights " + w + flags, "2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("the quick brown", 0), 0u) << r.out;
  EXPECT_GT(r.out.size(), std::string("the quick brown\n").size() + 5) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  // The same with the tokenizer named by --data, and again by --tokenizer: the same text.
  EXPECT_EQ(run_tandem("generate --weights " + w + flags + " --data " + tok, "2>/dev/null").out,
            r.out);
  EXPECT_EQ(
      run_tandem("generate --weights " + w + flags + " --tokenizer " + tok + "/tokenizer.model",
                 "2>/dev/null")
          .out,
      r.out);
}

}  // namespace
}  // namespace tandem
