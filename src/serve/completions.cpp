#include "serve/completions.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tandem/serve/http_error.h"

namespace tandem::serve {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 4;  // {"prompt": [ids]} is 2

const char* kFields[] = {"prompt", "max_tokens", "temperature", "top_k", "seed", "model"};

std::string type_of(const json& j) {
  return j.type_name();
}

int64_t integer_field(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi,
                      const std::string& why = "") {
  if (!body.contains(name)) return fallback;
  const json& v = body[name];
  if (!v.is_number_integer())
    throw HttpError(400, fmt::format("\"{}\" must be an integer, found {} {}", name, type_of(v),
                                     v.dump().substr(0, 32)));
  const bool is_unsigned = v.is_number_unsigned();
  const int64_t x = is_unsigned && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? INT64_MAX
                        : v.get<int64_t>();
  if (x < lo || x > hi)
    throw HttpError(400, fmt::format("\"{}\" is {}: expected an integer in [{}, {}]{}", name,
                                     v.dump().substr(0, 32), lo, hi, why));
  return x;
}

std::vector<int64_t> prompt_of(const json& body, const train::ModelCard& card) {
  if (!body.contains("prompt"))
    throw HttpError(400, "missing \"prompt\": expected a string or a list of token ids");
  const json& p = body["prompt"];
  const int64_t vocab = card.gpt.vocab_size;
  std::vector<int64_t> ids;
  if (p.is_string()) {
    if (!card.tokenizer)
      throw HttpError(
          400,
          "\"prompt\" is text but this server has no tokenizer (tandem serve --tokenizer): send "
          "a list of token ids");
    for (int id : card.tokenizer->encode(p.get<std::string>())) ids.push_back(id);
  } else if (p.is_array()) {
    for (size_t i = 0; i < p.size(); ++i) {
      const json& e = p[i];
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= vocab ||
          (e.is_number_unsigned() && e.get<uint64_t>() >= static_cast<uint64_t>(vocab)))
        throw HttpError(400, fmt::format("\"prompt\"[{}] is {}: expected a token id in [0, {})", i,
                                         e.dump().substr(0, 32), vocab));
      ids.push_back(e.get<int64_t>());
    }
  } else {
    throw HttpError(400, fmt::format("\"prompt\" must be a string or a list of token ids, found {}",
                                     type_of(p)));
  }
  if (ids.empty()) throw HttpError(400, "\"prompt\" is empty: expected at least 1 token");
  return ids;
}

}  // namespace

std::string decode_text(const data::Tokenizer& tokenizer, const std::vector<int64_t>& ids) {
  std::vector<int> known;
  for (int64_t id : ids)
    if (id >= 0 && id < tokenizer.vocab_size()) known.push_back(static_cast<int>(id));
  return tokenizer.decode(known);
}

CompletionRequest parse_completion_request(const std::string& text, const train::ModelCard& card,
                                           int64_t max_tokens_cap) {
  // A body nests 2 levels ({"prompt": [ids]}): deeper is refused while parsing, before a
  // million-level tree could be built (routes.cpp does the same for images).
  const json::parser_callback_t limit_depth = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxDepth)
      throw HttpError(
          400,
          fmt::format("the JSON body nests deeper than {} levels: expected {{\"prompt\": ...}}",
                      kMaxDepth));
    return true;
  };
  json body;
  try {
    body = json::parse(text, limit_depth);
  } catch (const json::exception& e) {
    throw HttpError(400, fmt::format("the body is not valid JSON: {}", e.what()));
  }
  if (!body.is_object())
    throw HttpError(
        400, fmt::format("expected a JSON object {{\"prompt\": ..., \"max_tokens\": N}}, found {}",
                         type_of(body)));
  for (const auto& [key, value] : body.items()) {
    bool known = false;
    for (const char* f : kFields) known = known || key == f;
    if (!known)
      throw HttpError(
          400,
          fmt::format("unknown field \"{}\": expected prompt, max_tokens, temperature, top_k, seed "
                      "or model",
                      key.substr(0, 64)));
  }
  if (body.contains("model") && !body["model"].is_string())
    throw HttpError(400,
                    fmt::format("\"model\" must be a string, found {}", type_of(body["model"])));
  CompletionRequest r;
  r.prompt = prompt_of(body, card);
  const int64_t t = static_cast<int64_t>(r.prompt.size()), room = card.gpt.block_size - t;
  if (room < 0)
    throw HttpError(
        400, fmt::format("\"prompt\" has {} tokens: expected at most the model's {} positions", t,
                         card.gpt.block_size));
  const int64_t hi = std::min(room, max_tokens_cap);
  r.options.max_new_tokens = integer_field(
      body, "max_tokens", std::min<int64_t>(16, hi), 0, hi,
      room <= max_tokens_cap
          ? fmt::format(" (a prompt of {} tokens leaves {} of the model's {} positions)", t, room,
                        card.gpt.block_size)
          : fmt::format(" (the server's --max-completion-tokens)"));
  if (body.contains("temperature")) {
    const json& v = body["temperature"];
    if (!v.is_number() || v.get<double>() < 0)
      throw HttpError(400, fmt::format("\"temperature\" is {}: expected a number >= 0 (0 = greedy)",
                                       v.dump().substr(0, 32)));
    r.options.sampling.temperature = v.get<double>();
  }
  r.options.sampling.top_k = integer_field(body, "top_k", 0, 0, INT64_MAX, " (0 = every token)");
  r.options.sampling.seed = static_cast<uint64_t>(integer_field(body, "seed", 0, 0, INT64_MAX));
  r.options.eos_id = card.tokenizer ? card.tokenizer->eos_id() : -1;
  nn::check_generate(card.gpt, r.prompt, r.options);
  return r;
}

std::string completion_json(const train::ModelCard& card, const Completion& c) {
  const int64_t n = static_cast<int64_t>(c.tokens.size());
  json choice = {
      {"index", 0},
      {"text", card.tokenizer ? json(decode_text(*card.tokenizer, c.tokens)) : json(nullptr)},
      {"token_ids", c.tokens},
      {"finish_reason", c.finish_reason}};
  return json{{"object", "text_completion"},
              {"model", card.model},
              {"version", c.version},
              {"choices", json::array({std::move(choice)})},
              {"usage",
               {{"prompt_tokens", c.prompt_tokens},
                {"completion_tokens", n},
                {"total_tokens", c.prompt_tokens + n}}},
              {"seconds", c.seconds}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tandem::serve
