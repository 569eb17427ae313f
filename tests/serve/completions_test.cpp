// POST /v1/completions over HTTP on a language model: transformers' random GPT-2
// (tests/golden/gpt2_hf_init.safetensors, 2 heads, no tokenizer) answers greedy requests with
// transformers' tokens (tests/golden/gpt2_hf_generate.safetensors), the same seed with the same
// tokens and another seed with others, and a newly published version with its own weights.
// Every bad request is a one-line JSON 400 naming the field; /v1/predict on a language model
// and /v1/completions on an image classifier are 400s that say which endpoint fits; a GET is
// 405; GET /v1/model describes the language model.
#include <gtest/gtest.h>

#include "serve/serve_test_util.h"
#include "tandem/nn/generate/gpt_weights.h"
#include "tandem/rng.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

const std::string kInit = TANDEM_SOURCE_DIR "/tests/golden/gpt2_hf_init.safetensors";
const std::string kGolden = TANDEM_SOURCE_DIR "/tests/golden/gpt2_hf_generate.safetensors";

std::vector<int64_t> ids_of(const Tensor& t) {
  return {t.data<int64_t>(), t.data<int64_t>() + t.numel()};
}

std::shared_ptr<serve::ServedWeights> weights(int64_t version, float noise = 0) {
  NamedTensors t = load_safetensors(kInit);
  Philox rng(3, static_cast<uint64_t>(version));
  for (auto& [name, tensor] : t)
    for (int64_t i = 0; i < tensor.numel(); ++i)
      tensor.data<float>()[i] += noise * (2 * rng.uniform() - 1);
  auto w = std::make_shared<serve::ServedWeights>();
  w->version = version;
  w->weights = serve::host_weights(std::move(t));
  return w;
}

class Completions : public ::testing::Test {
 protected:
  void SetUp() override {
    const NamedTensors t = load_safetensors(kInit);
    card_ = train::language_model_card("gpt2", nn::gpt_config_of(t, {}, 2, kInit), "");
    serve::ServeOptions o;
    o.max_completion_tokens = 24;
    server_ = start_server(card_, o);
    server_->publish(weights(0));
    cli_ = client_of(*server_);
  }
  json post(const json& body, int status = 200) {
    auto r = cli_->Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, status) << r->body;
    return json::parse(r->body);
  }
  void refused(const std::string& body, const std::string& needle) {
    expect_json_error(cli_->Post("/v1/completions", body, "application/json"), 400, needle);
  }
  train::ModelCard card_;
  std::unique_ptr<serve::InferenceServer> server_;
  std::unique_ptr<httplib::Client> cli_;
};

TEST_F(Completions, GreedyIsTransformers) {
  const NamedTensors g = load_safetensors(kGolden);
  const std::vector<int64_t> prompt = ids_of(find_tensor(g, "prompt", kGolden));
  const std::vector<int64_t> want = ids_of(find_tensor(g, "tokens", kGolden));
  const json j = post({{"prompt", prompt}, {"max_tokens", 20}, {"temperature", 0}});
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "gpt2");
  EXPECT_EQ(j["version"], 0);
  EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<int64_t>>(), want);
  EXPECT_TRUE(j["choices"][0]["text"].is_null());  // no tokenizer
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(j["usage"]["completion_tokens"], 20);
  EXPECT_EQ(j["usage"]["total_tokens"], 27);
  // top_k 1 at any temperature is greedy; the default max_tokens is 16.
  const json k1 = post({{"prompt", prompt}, {"top_k", 1}, {"temperature", 1.5}, {"seed", 8}});
  EXPECT_EQ(k1["choices"][0]["token_ids"].get<std::vector<int64_t>>(),
            std::vector<int64_t>(want.begin(), want.begin() + 16));
}

TEST_F(Completions, SeedDecidesAndVersionsSwap) {
  const json body = {{"prompt", {1, 2, 3}}, {"max_tokens", 20}, {"temperature", 1}, {"seed", 11}};
  const json a = post(body);
  EXPECT_EQ(post(body)["choices"], a["choices"]);
  json other = body;
  other["seed"] = 12;
  EXPECT_NE(post(other)["choices"][0]["token_ids"], a["choices"][0]["token_ids"]);
  server_->publish(weights(5, 0.5f));
  const json b = post(body);
  EXPECT_EQ(b["version"], 5);
  EXPECT_NE(b["choices"][0]["token_ids"], a["choices"][0]["token_ids"]);
}

TEST_F(Completions, BadRequestsNameTheField) {
  refused("{\"prompt\": [1, 2", "the body is not valid JSON");
  refused("[1, 2]", "expected a JSON object {\"prompt\": ..., \"max_tokens\": N}, found array");
  refused("{}", "missing \"prompt\": expected a string or a list of token ids");
  refused(R"({"prompt": 5})", "\"prompt\" must be a string or a list of token ids, found number");
  refused(R"({"prompt": []})", "\"prompt\" is empty: expected at least 1 token");
  refused(R"({"prompt": [1, 64]})", "\"prompt\"[1] is 64: expected a token id in [0, 64)");
  refused(R"({"prompt": [1, -1]})", "\"prompt\"[1] is -1: expected a token id in [0, 64)");
  refused(R"({"prompt": [1, 2.5]})", "\"prompt\"[1] is 2.5: expected a token id in [0, 64)");
  refused(R"({"prompt": "hello"})", "\"prompt\" is text but this server has no tokenizer");
  refused(R"({"prompt": [1, 2], "max_tokens": 25})",
          "\"max_tokens\" is 25: expected an integer in [0, 24] (the server's "
          "--max-completion-tokens)");
  refused(R"({"prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "max_tokens": 23})",
          "\"max_tokens\" is 23: expected an integer in [0, 22] (a prompt of 10 tokens leaves 22 "
          "of the model's 32 "
          "positions)");
  refused(R"({"prompt": [1], "max_tokens": -1})",
          "\"max_tokens\" is -1: expected an integer in [0, 24]");
  refused(R"({"prompt": [1], "max_tokens": "5"})",
          "\"max_tokens\" must be an integer, found string");
  refused(R"({"prompt": [1], "temperature": -0.5})",
          "\"temperature\" is -0.5: expected a number >= 0 (0 = greedy)");
  refused(R"({"prompt": [1], "temperature": "hot"})",
          "\"temperature\" is \"hot\": expected a number >= 0");
  refused(R"({"prompt": [1], "top_k": -2})", "\"top_k\" is -2: expected an integer in [0, ");
  refused(R"({"prompt": [1], "seed": -2})", "\"seed\" is -2: expected an integer in [0, ");
  refused(R"({"prompt": [1], "max_token": 3})",
          "unknown field \"max_token\": expected prompt, max_tokens");
  refused(std::string(100, '[') + std::string(100, ']'), "nests deeper than 4 levels");
  std::vector<int64_t> long_prompt(33, 1);
  refused(json{{"prompt", long_prompt}}.dump(),
          "\"prompt\" has 33 tokens: expected at most the model's 32 positions");
  // Other endpoints, other methods.
  expect_json_error(cli_->Post("/v1/predict", "{}", "application/json"), 400,
                    "model 'gpt2' is a language model: POST /v1/completions");
  auto get = cli_->Get("/v1/completions");
  expect_json_error(get, 405, "/v1/completions does not take GET: expected POST");
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  // It still answers after all of them.
  EXPECT_EQ(post({{"prompt", {1}}, {"max_tokens", 2}})["usage"]["completion_tokens"], 2);
}

TEST_F(Completions, ModelDescribesTheLanguageModel) {
  auto r = cli_->Get("/v1/model");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["kind"], "language_model");
  EXPECT_EQ(j["vocab_size"], 64);
  EXPECT_EQ(j["n_positions"], 32);
  EXPECT_EQ(j["n_layer"], 2);
  EXPECT_EQ(j["n_head"], 2);
  EXPECT_EQ(j["n_embd"], 32);
  EXPECT_TRUE(j["tokenizer"].is_null());
  EXPECT_EQ(j["max_completion_tokens"], 24);
  EXPECT_EQ(j["endpoint"], "/v1/completions");
  EXPECT_EQ(j["version"], 0);
}

TEST(CompletionsOnImages, AreRefused) {
  const train::ModelCard card = synthetic_card();
  auto server = start_server(card);
  server->publish(seeded_weights(card, 1, 0));
  auto cli = client_of(*server);
  expect_json_error(cli->Post("/v1/completions", R"({"prompt": [1]})", "application/json"), 400,
                    "model 'mlp' is an image classifier: POST images to /v1/predict");
  auto r = cli->Get("/v1/model");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["kind"], "image_classifier");
}

}  // namespace
}  // namespace tandem::testing
