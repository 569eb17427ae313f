// The answers of POST /v1/completions: the whole answer, the chunks of a streamed one, and the
// text of token ids.
#include <atomic>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "serve/completions.h"

namespace tandem::serve {
namespace {

using nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json usage_of(const Completion& c) {
  const int64_t n = c.completion_tokens();
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", n},
          {"total_tokens", c.prompt_tokens + n}};
}

json head_of(const CompletionHeader& h) {
  return {{"id", h.id},
          {"object", "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"version", h.version}};
}

}  // namespace

std::string decode_text(const data::Tokenizer& tokenizer, const std::vector<int64_t>& ids) {
  std::vector<int> known;
  for (int64_t id : ids)
    if (id >= 0 && id < tokenizer.vocab_size()) known.push_back(static_cast<int>(id));
  return tokenizer.decode(known);
}

CompletionHeader completion_header(const train::ModelCard& card, int64_t version) {
  // The process's start time and a counter: unique within the process, and across restarts.
  static const int64_t start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count();
  static std::atomic<uint64_t> next{0};
  CompletionHeader h;
  h.id = fmt::format("cmpl-{:x}-{}", start_ns, next.fetch_add(1));
  h.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  h.model = card.model;
  h.version = version;
  return h;
}

std::string completion_json(const train::ModelCard& card, const CompletionHeader& h,
                            const Completion& c) {
  json choices = json::array();
  for (size_t i = 0; i < c.choices.size(); ++i) {
    const CompletionChoice& ch = c.choices[i];
    choices.push_back({{"index", i},
                       {"text", card.tokenizer ? json(ch.text) : json(nullptr)},
                       {"logprobs", nullptr},
                       {"token_ids", ch.tokens},
                       {"finish_reason", ch.finish_reason}});
  }
  json j = head_of(h);
  j["choices"] = std::move(choices);
  j["usage"] = usage_of(c);
  j["seconds"] = c.seconds;
  return dump(j);
}

std::string completion_chunk(const train::ModelCard& card, const CompletionHeader& h,
                             const CompletionDelta& d) {
  json choice = {
      {"index", d.index},
      {"text", card.tokenizer ? json(d.text) : json(nullptr)},
      {"logprobs", nullptr},
      {"finish_reason", d.finish_reason.empty() ? json(nullptr) : json(d.finish_reason)}};
  if (d.token >= 0) choice["token_ids"] = json::array({d.token});
  json j = head_of(h);
  j["choices"] = json::array({std::move(choice)});
  return "data: " + dump(j) + "\n\n";
}

std::string usage_chunk(const CompletionHeader& h, const Completion& c) {
  json j = head_of(h);
  j["choices"] = json::array();
  j["usage"] = usage_of(c);
  return "data: " + dump(j) + "\n\n";
}

}  // namespace tandem::serve
