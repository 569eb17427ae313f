// Language models through the `tandem` program: `tandem serve --weights` of GPT weights answers
// POST /v1/completions with the tokens `tandem generate` prints for the same prompt and seed
// (transformers' random GPT-2, --n-head 2), and `tandem train --serve` of a GPT publishes
// its weights as it trains, so /v1/completions answers with versions that only grow.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <regex>

#include "data/temp_dir.h"
#include "serve/serve_process.h"
#include "serve/serve_test_util.h"
#include "tandem/data/token_shard.h"
#include "train/run_tandem.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kInit = TANDEM_SOURCE_DIR "/tests/golden/gpt2_hf_init.safetensors";

TEST(CliServeLm, ServeAnswersWhatGeneratePrints) {
  TempDir dir;
  const CmdResult g = run_tandem(
      "generate --weights " + kInit +
          " --n-head 2 --threads 1 --prompt-ids 4,5,6 --max-new-tokens 10 --temperature 0.9 "
          "--top-k 20 --seed 21 --ids",
      "2>/dev/null");
  ASSERT_EQ(g.exit_code, 0) << g.out;
  TandemProcess serve(
      "serve --weights " + kInit + " --n-head 2 --listen 127.0.0.1:0 --serve-threads 1", dir.str());
  const int port = serve.wait_port();
  ASSERT_GT(port, 0) << serve.output();
  httplib::Client cli("127.0.0.1", port);
  const json body = {
      {"prompt", {4, 5, 6}}, {"max_tokens", 10}, {"temperature", 0.9}, {"top_k", 20}, {"seed", 21}};
  auto r = cli.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::vector<int64_t> ids = json::parse(r->body)["choices"][0]["token_ids"];
  EXPECT_EQ("4,5,6," + fmt::format("{}", fmt::join(ids, ",")) + "\n", g.out);
  EXPECT_EQ(serve.finish(true), 0) << serve.output();
  EXPECT_NE(serve.output().find("POST /v1/completions"), std::string::npos) << serve.output();
  EXPECT_NE(serve.output().find("stopped by signal 15 after 1 completion requests"),
            std::string::npos)
      << serve.output();
}

TEST(CliServeLm, TrainServePublishesTheGpt) {
  TempDir dir;
  std::vector<uint32_t> train, val;
  for (uint32_t i = 0; i < 2000; ++i) train.push_back((i * 7 + i / 13) % 64);
  for (uint32_t i = 5000; i < 5033; ++i) val.push_back((i * 7 + i / 13) % 64);
  fs::create_directories(dir.file("data"));
  data::write_token_shard(dir.file("data/train.tok"), train, 64);
  data::write_token_shard(dir.file("data/val.tok"), val, 64);
  // On virt with 3 ms per copy the 600 steps take seconds however loaded the machine, so
  // requests are answered before the run ends.
  TandemProcess run(
      "train --model gpt2 --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --init " + kInit +
          " --data " + dir.file("data") +
          " --max-steps 600 --batch-size 2 --threads 1 --progress 0 --serve 127.0.0.1:0 "
          "--publish-every 50 --serve-threads 1 --device 'virt:0?latency_us=3000'",
      dir.str());
  const int port = run.wait_port();
  ASSERT_GT(port, 0) << run.output();
  httplib::Client cli("127.0.0.1", port);
  int64_t last = -1, answers = 0;
  const std::string body = R"({"prompt": [1, 2, 3], "max_tokens": 8, "temperature": 0})";
  while (!run.exited()) {
    auto r = cli.Post("/v1/completions", body, "application/json");
    if (!r) continue;  // the run ended between the check and the request
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    EXPECT_GE(j["version"].get<int64_t>(), last);
    last = j["version"];
    EXPECT_EQ(j["choices"][0]["token_ids"].size(), 8u);
    ++answers;
  }
  EXPECT_EQ(run.finish(false), 0) << run.output();
  EXPECT_GT(answers, 0);
  const std::string out = run.output();
  // Version 0, every 50 of 600 steps (12), and after each epoch's evaluation.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex(R"(served (\d+) completion requests, (\d+) versions published)")))
      << out;
  EXPECT_GE(std::stoll(m[1]), answers);
  EXPECT_GE(std::stoll(m[2]), 13);
  EXPECT_NE(out.find("POST /v1/completions"), std::string::npos) << out;
}

}  // namespace
}  // namespace tandem::testing
