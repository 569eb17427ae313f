// "stream": true: server-sent events, one per token with the choice's index and its text
// (null without a tokenizer) and token, the last of each choice with its finish_reason, then
// [DONE]; Content-Type text/event-stream, not compressed even when the client accepts gzip.
// The events concatenate to the answer of the same request without "stream" (texts, tokens,
// finish reasons, with n choices and stop strings), include_usage adds the usage chunk. A
// client that hangs up after the first event stops the generation: the first event arrives
// before the request's tokens are all made, the completion counts as cancelled having made
// only part of its tokens, and the server answers the next request. Then "stop" on a model
// with a tokenizer: the text is cut before the first stop string, finish_reason "stop", and
// ChoiceText holds back what could begin one.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "data/asan_skip.h"
#include "serve/choice_text.h"
#include "serve/lm_test_util.h"
#include "serve/sse_client.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

// Per choice, the concatenated texts (or null when any is null), tokens and finish_reason.
struct Streamed {
  std::vector<json> text;
  std::vector<std::vector<int64_t>> tokens;
  std::vector<std::string> finish;
};

Streamed join(const SseAnswer& a, size_t n) {
  Streamed s{std::vector<json>(n, ""), std::vector<std::vector<int64_t>>(n),
             std::vector<std::string>(n)};
  for (const json& c : a.chunks()) {
    if (c["choices"].empty()) continue;  // the usage chunk
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_EQ(c["choices"].size(), 1u);
    const json& ch = c["choices"][0];
    const size_t i = ch["index"].get<size_t>();
    EXPECT_LT(i, n);
    if (i >= n) continue;
    EXPECT_TRUE(s.finish[i].empty()) << "an event after choice " << i << " finished";
    if (ch["text"].is_null())
      s.text[i] = nullptr;
    else if (!s.text[i].is_null())
      s.text[i] = s.text[i].get<std::string>() + ch["text"].get<std::string>();
    if (ch.contains("token_ids"))
      for (const json& t : ch["token_ids"]) s.tokens[i].push_back(t.get<int64_t>());
    if (!ch["finish_reason"].is_null()) s.finish[i] = ch["finish_reason"];
  }
  return s;
}

// The stream of `body` + "stream": true equals the answer of `body`.
void expect_stream_matches(serve::InferenceServer& server, json body) {
  auto cli = client_of(server);
  auto r = cli->Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json whole = json::parse(r->body);
  body["stream"] = true;
  const SseAnswer a = post_stream(server.port(), body.dump());
  ASSERT_EQ(a.status, 200) << a.headers;
  EXPECT_NE(a.headers.find("Content-Type: text/event-stream"), std::string::npos) << a.headers;
  EXPECT_EQ(a.headers.find("Content-Encoding"), std::string::npos) << a.headers;
  ASSERT_FALSE(a.events.empty());
  EXPECT_EQ(a.events.back(), "[DONE]");
  const size_t n = whole["choices"].size();
  const Streamed s = join(a, n);
  size_t tokens = 0;
  for (size_t i = 0; i < n; ++i) {
    const json& c = whole["choices"][i];
    EXPECT_EQ(s.text[i], c["text"]) << "choice " << i;
    EXPECT_EQ(s.tokens[i], c["token_ids"].get<std::vector<int64_t>>()) << "choice " << i;
    EXPECT_EQ(s.finish[i], c["finish_reason"]) << "choice " << i;
    tokens += std::max<size_t>(1, c["token_ids"].size());
  }
  EXPECT_EQ(a.events.size(), tokens + 1) << "one event per token (or per empty choice), and [DONE]";
}

class CompletionStream : public ServedLm {
 protected:
  void SetUp() override { serve_hf_init(24); }
};

TEST_F(CompletionStream, EventsAreTheAnswer) {
  expect_stream_matches(*server_, {{"prompt", {1, 2, 3}}, {"max_tokens", 12}, {"seed", 4}});
  expect_stream_matches(
      *server_,
      {{"prompt", {5}}, {"max_tokens", 20}, {"seed", 4}, {"n", 3}, {"top_p", 0.8}, {"top_k", 30}});
  expect_stream_matches(*server_, {{"prompt", {5}}, {"max_tokens", 0}, {"n", 2}});
  // A chunk as OpenAI's: id, created and model on each; text null without a tokenizer.
  const SseAnswer a =
      post_stream(server_->port(), json{{"prompt", {1}},
                                        {"max_tokens", 3},
                                        {"stream", true},
                                        {"stream_options", {{"include_usage", true}}}}
                                       .dump());
  ASSERT_EQ(a.events.size(), 5u);  // 3 tokens, usage, [DONE]
  const std::vector<json> c = a.chunks();
  EXPECT_EQ(c[0]["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(c[0]["model"], "gpt2");
  EXPECT_EQ(c[0]["version"], 0);
  EXPECT_EQ(c[1]["id"], c[0]["id"]);
  EXPECT_TRUE(c[0]["choices"][0]["text"].is_null());
  EXPECT_TRUE(c[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(c[2]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(c[3]["choices"].empty());
  EXPECT_EQ(c[3]["usage"]["completion_tokens"], 3);
  EXPECT_EQ(c[3]["usage"]["prompt_tokens"], 1);
  // Bad requests are still one-line JSON errors, before any event.
  expect_json_error(
      client_of(*server_)->Post("/v1/completions", R"({"prompt": [1], "stream": true, "n": 99})",
                                "application/json"),
      400, "\"n\" is 99");
}

// A GPT slow enough that 16 choices of 200 tokens take a while (about a second on one core).
TEST(CompletionStreamHangUp, StopsTheGeneration) {
  const nn::GptConfig config{64, 256, 4, 4, 128, 1e-5f};
  const train::ModelCard card = train::language_model_card("gpt2", config, "");
  auto server = lm_server(card, snapshot_of(gpt_tensors(config)), 200);
  const json body = {{"prompt", {1}}, {"max_tokens", 200}, {"n", 16}, {"stream", true}};
  const std::string got = read_first_event_and_hang_up(server->port(), body.dump());
  ASSERT_NE(got.find("data: {"), std::string::npos) << got;
  // The first event came while the tokens were still being made (the counter grows when the
  // request ends).
  EXPECT_EQ(server->metrics().completions().tokens, 0);
  for (int i = 0; i < 600 && server->metrics().completions().cancelled == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(server->metrics().completions().cancelled, 1);
  EXPECT_LT(server->metrics().completions().tokens, 16 * 200);
  // The server goes on answering, streamed or not.
  const SseAnswer a = post_stream(
      server->port(), json{{"prompt", {1}}, {"max_tokens", 2}, {"stream", true}}.dump());
  EXPECT_EQ(a.events.size(), 3u);
  auto r = client_of(*server)->Post("/v1/completions", R"({"prompt": [1], "max_tokens": 2})",
                                    "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(server->metrics().completions().cancelled, 1);
}

// A GPT over the corpus tokenizer's 300 tokens, tandem's initialisation.
class CompletionStop : public ServedLm {
 protected:
  void SetUp() override {
    SKIP_UNDER_SANITIZER();  // the tokenizer is the SentencePiece module
    const nn::GptConfig config{300, 64, 2, 2, 32, 1e-5f};
    serve(train::language_model_card("gpt-mini", config, corpus_tokenizer()),
          snapshot_of(gpt_tensors(config)), 48);
  }
};

TEST_F(CompletionStop, TextIsCutBeforeTheStopString) {
  const json body = {{"prompt", "the quick brown"}, {"max_tokens", 40}, {"seed", 6}};
  const json free = post(body)["choices"][0];
  const std::string text = free["text"];
  ASSERT_GE(text.size(), 20u) << text;
  EXPECT_EQ(free["finish_reason"], "length");
  const std::vector<int64_t> all = free["token_ids"];
  // A stop string from the middle of the text: the answer is the text before its first
  // occurrence, its tokens a prefix of the free ones.
  // (3 ASCII bytes: a random model's text has multi-byte characters, " ⁇ " for unknown ids.)
  size_t at = text.size() / 2;
  const auto ascii = [&](size_t p) { return static_cast<unsigned char>(text[p]) < 0x80; };
  while (at + 3 < text.size() && !(ascii(at) && ascii(at + 1) && ascii(at + 2))) ++at;
  ASSERT_LT(at + 3, text.size()) << text;
  const std::string stop = text.substr(at, 3);
  json stopped_body = body;
  stopped_body["stop"] = {"never there", stop};
  const json s = post(stopped_body)["choices"][0];
  EXPECT_EQ(s["text"], text.substr(0, text.find(stop))) << "stop " << stop;
  EXPECT_EQ(s["finish_reason"], "stop");
  const std::vector<int64_t> ids = s["token_ids"];
  ASSERT_LE(ids.size(), all.size());
  EXPECT_EQ(ids,
            std::vector<int64_t>(all.begin(), all.begin() + static_cast<ptrdiff_t>(ids.size())));
  EXPECT_LT(ids.size(), all.size());
  // A single string works as a list of one; streamed, the events make the same text.
  stopped_body["stop"] = stop;
  EXPECT_EQ(post(stopped_body)["choices"][0], s);
  expect_stream_matches(*server_, stopped_body);
  stopped_body["n"] = 3;
  expect_stream_matches(*server_, stopped_body);
  expect_stream_matches(*server_, body);
}

TEST_F(CompletionStop, ChoiceTextHoldsBackWhatCouldBeginAStop) {
  const data::Tokenizer& tok = *card_.tokenizer;
  const std::vector<int> ids = tok.encode("the quick brown fox jumps over the lazy dog");
  serve::ChoiceText t(&tok, {"fox jumps", "dog."});
  std::string released;
  for (const int id : ids) {
    released += t.add(id);
    // Never released: text that could still be the start of "fox jumps".
    EXPECT_EQ(released.find("fox"), std::string::npos) << released;
    if (t.stopped()) break;
  }
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(released, "the quick brown ");
  EXPECT_EQ(t.text(), released);
  EXPECT_EQ(t.finish(), "");
  // Without a stop string the held-back tail comes with finish().
  serve::ChoiceText u(&tok, {"dog."});
  std::string all;
  for (const int id : ids) all += u.add(id);
  EXPECT_FALSE(u.stopped());
  all += u.finish();
  EXPECT_EQ(all, "the quick brown fox jumps over the lazy dog");
  serve::ChoiceText none(nullptr, {"x"});
  EXPECT_EQ(none.add(3), "");
  EXPECT_FALSE(none.stopped());
}

}  // namespace
}  // namespace tandem::testing
