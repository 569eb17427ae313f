// OpenAI's completions fields on transformers' random GPT-2 (no tokenizer): "n" choices, each
// the choice 0 of the same request with seed + index; "top_p" (a tiny nucleus is greedy, 1 is
// no nucleus); null for a field's default; the fields of OpenAI's clients accepted with the
// values that ask for nothing tandem lacks and refused otherwise, each with a one-line 400
// naming the field and what is expected; "stop" refused without a tokenizer; unknown fields
// still refused.
#include <gtest/gtest.h>

#include "serve/lm_test_util.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

class CompletionFields : public ServedLm {
 protected:
  void SetUp() override { serve_hf_init(24); }
  std::vector<int64_t> ids(const json& body, size_t choice = 0) {
    return post(body)["choices"][choice]["token_ids"].get<std::vector<int64_t>>();
  }
  void refused(const std::string& fields, const std::string& needle) {
    expect_json_error(
        cli_->Post("/v1/completions", R"({"prompt": [1, 2], )" + fields + "}", "application/json"),
        400, needle);
  }
};

TEST_F(CompletionFields, NChoicesAreSeedPlusIndex) {
  const json body = {{"prompt", {1, 2, 3}}, {"max_tokens", 12}, {"seed", 40}, {"n", 3}};
  const json j = post(body);
  ASSERT_EQ(j["choices"].size(), 3u);
  int64_t tokens = 0;
  for (int64_t i = 0; i < 3; ++i) {
    const json& c = j["choices"][static_cast<size_t>(i)];
    EXPECT_EQ(c["index"], i);
    EXPECT_EQ(c["finish_reason"], "length");
    EXPECT_TRUE(c["logprobs"].is_null());
    json one = body;
    one.erase("n");
    one["seed"] = 40 + i;
    EXPECT_EQ(c["token_ids"].get<std::vector<int64_t>>(), ids(one)) << "choice " << i;
    tokens += static_cast<int64_t>(c["token_ids"].size());
  }
  EXPECT_NE(j["choices"][0]["token_ids"], j["choices"][1]["token_ids"]);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], tokens);
  EXPECT_EQ(j["usage"]["total_tokens"], tokens + 3);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_NE(j["id"], post(body)["id"]);
  EXPECT_GT(j["created"].get<int64_t>(), 1700000000);
  // The same request, the same choices; n = 16 is the cap.
  EXPECT_EQ(post(body)["choices"], j["choices"]);
  json many = body;
  many["n"] = 16;
  EXPECT_EQ(post(many)["choices"].size(), 16u);
  refused(R"("n": 17)", "\"n\" is 17: expected an integer in [1, 16] (choices per request)");
  refused(R"("n": 0)", "\"n\" is 0: expected an integer in [1, 16]");
  refused(R"("n": "2")", "\"n\" must be an integer, found string");
}

TEST_F(CompletionFields, TopPNucleus) {
  const json greedy = {{"prompt", {4, 5, 6}}, {"max_tokens", 16}, {"temperature", 0}};
  const std::vector<int64_t> want = ids(greedy);
  for (const int64_t seed : {1, 2, 3})
    EXPECT_EQ(ids({{"prompt", {4, 5, 6}}, {"max_tokens", 16}, {"top_p", 1e-9}, {"seed", seed}}),
              want);
  const json sampled = {{"prompt", {4, 5, 6}}, {"max_tokens", 16}, {"seed", 9}};
  json p1 = sampled;
  p1["top_p"] = 1;
  EXPECT_EQ(ids(p1), ids(sampled));
  json half = sampled;
  half["top_p"] = 0.5;
  EXPECT_EQ(ids(half), ids(half));
  refused(R"("top_p": 0)", "\"top_p\" is 0: expected a number in (0, 1] (1 = every token)");
  refused(R"("top_p": 1.5)", "\"top_p\" is 1.5: expected a number in (0, 1]");
  refused(R"("top_p": "all")", "\"top_p\" is \"all\": expected a number in (0, 1]");
}

TEST_F(CompletionFields, OpenAiDefaultsAreAcceptedAndNullIsTheDefault) {
  const json plain = {{"prompt", {7, 8}}, {"max_tokens", 10}, {"seed", 3}};
  const json a = post(plain);
  json full = plain;
  for (const char* f : {"logprobs", "suffix", "stream_options", "stop", "temperature", "top_p",
                        "top_k", "n", "best_of", "logit_bias", "user", "model", "echo", "stream"})
    full[f] = nullptr;
  full["seed"] = 3;
  EXPECT_EQ(post(full)["choices"], a["choices"]);
  json openai = plain;
  openai.update({{"echo", false},
                 {"presence_penalty", 0},
                 {"frequency_penalty", 0.0},
                 {"user", "someone"},
                 {"best_of", 1},
                 {"logit_bias", json::object()},
                 {"suffix", ""},
                 {"stream", false},
                 {"stream_options", {{"include_usage", true}}},
                 {"stop", json::array()},
                 {"model", "anything"}});
  EXPECT_EQ(post(openai)["choices"], a["choices"]);
}

TEST_F(CompletionFields, ValuesTandemCannotHonourAreRefused) {
  refused(R"("echo": true)", "\"echo\" is true: tandem does not echo the prompt (expected false)");
  refused(R"("echo": 1)", "\"echo\" must be true or false, found number 1");
  refused(R"("logprobs": 2)",
          "\"logprobs\" is 2: tandem returns no log probabilities (expected null)");
  refused(R"("logprobs": 0)", "\"logprobs\" is 0: tandem returns no log probabilities");
  refused(R"("presence_penalty": 0.5)",
          "\"presence_penalty\" is 0.5: tandem applies no penalties (expected 0)");
  refused(R"("frequency_penalty": -1)",
          "\"frequency_penalty\" is -1: tandem applies no penalties (expected 0)");
  refused(R"("best_of": 3)", "\"best_of\" is 3: tandem does not rank candidates (expected 1)");
  refused(R"("logit_bias": {"5": 10})",
          "\"logit_bias\" is {\"5\":10}: tandem applies no logit bias (expected {} or null)");
  refused(
      R"("suffix": "end")",
      "\"suffix\" is \"end\": tandem does not insert text after the completion (expected null)");
  refused(R"("user": 5)", "\"user\" must be a string, found number");
  refused(R"("stream": "yes")", "\"stream\" must be true or false, found string \"yes\"");
  refused(R"("stream": true, "stream_options": {"include_usage": 1})",
          "\"include_usage\" must be true or false, found number 1");
  refused(R"("stream": true, "stream_options": {"other": true})",
          "unknown field \"stream_options\".\"other\": expected include_usage");
  refused(R"("stream_options": [1])", "\"stream_options\" must be an object");
  refused(R"("stop": "\n")",
          "\"stop\" matches text and this server has no tokenizer (tandem serve --tokenizer): "
          "leave \"stop\" out");
  refused(R"("stop": 5)",
          "\"stop\" is number 5: expected a string or a list of at most 4 non-empty strings");
  refused(
      R"("stop": ["a", "b", "c", "d", "e"])",
      "\"stop\" is array of 5 items: expected a string or a list of at most 4 non-empty strings");
  refused(R"("stop": ["a", 1])", "\"stop\"[1] is 1: expected a string or a list");
  refused(R"("stop": [""])", "\"stop\" holds an empty string");
  refused(R"("prompt2": 1)",
          "unknown field \"prompt2\": expected prompt, max_tokens, temperature, top_k, top_p, n, "
          "stop, stream, seed or model (or OpenAI's stream_options, logprobs, echo, ");
  refused(R"("temperature": null, "max_token": 3)", "unknown field \"max_token\"");
  expect_json_error(cli_->Post("/v1/completions", R"({"prompt": null})", "application/json"), 400,
                    "\"prompt\" must be a string or a list of token ids, found null");
  // It still answers after all of them.
  EXPECT_EQ(post({{"prompt", {1}}, {"max_tokens", 2}})["usage"]["completion_tokens"], 2);
}

}  // namespace
}  // namespace tandem::testing
