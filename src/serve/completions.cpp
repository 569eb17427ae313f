#include "serve/completions.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tandem/serve/http_error.h"

namespace tandem::serve {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 4;  // {"prompt": [ids]} is 2

// The fields tandem honours, then those of OpenAI's completions it accepts with the values
// that change nothing (see check_openai_fields).
const char* kFields[] = {"prompt", "max_tokens", "temperature", "top_k", "top_p",
                         "n",      "stop",       "stream",      "seed",  "model"};
const char* kOpenAiFields[] = {"stream_options",   "logprobs",          "echo",
                               "presence_penalty", "frequency_penalty", "user",
                               "best_of",          "logit_bias",        "suffix"};

std::string type_of(const json& j) {
  return j.type_name();
}

std::string shown(const json& v) {
  return v.dump().substr(0, 32);
}

int64_t integer_field(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi,
                      const std::string& why = "") {
  if (!body.contains(name)) return fallback;
  const json& v = body[name];
  if (!v.is_number_integer())
    throw HttpError(
        400, fmt::format("\"{}\" must be an integer, found {} {}", name, type_of(v), shown(v)));
  const bool is_unsigned = v.is_number_unsigned();
  const int64_t x = is_unsigned && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? INT64_MAX
                        : v.get<int64_t>();
  if (x < lo || x > hi)
    throw HttpError(400, fmt::format("\"{}\" is {}: expected an integer in [{}, {}]{}", name,
                                     shown(v), lo, hi, why));
  return x;
}

bool bool_field(const json& body, const char* name, bool fallback) {
  if (!body.contains(name)) return fallback;
  const json& v = body[name];
  if (!v.is_boolean())
    throw HttpError(
        400, fmt::format("\"{}\" must be true or false, found {} {}", name, type_of(v), shown(v)));
  return v.get<bool>();
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
                                         shown(e), vocab));
      ids.push_back(e.get<int64_t>());
    }
  } else {
    throw HttpError(400, fmt::format("\"prompt\" must be a string or a list of token ids, found {}",
                                     type_of(p)));
  }
  if (ids.empty()) throw HttpError(400, "\"prompt\" is empty: expected at least 1 token");
  return ids;
}

// "stop": a string or a list of at most kMaxStops non-empty strings; they match decoded text,
// so they need the tokenizer.
std::vector<std::string> stop_of(const json& body, const train::ModelCard& card) {
  if (!body.contains("stop")) return {};
  const json& v = body["stop"];
  const std::string expected =
      fmt::format("expected a string or a list of at most {} non-empty strings", kMaxStops);
  std::vector<std::string> stop;
  if (v.is_string()) {
    stop.push_back(v.get<std::string>());
  } else if (v.is_array() && v.size() <= kMaxStops) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string())
        throw HttpError(400, fmt::format("\"stop\"[{}] is {}: {}", i, shown(v[i]), expected));
      stop.push_back(v[i].get<std::string>());
    }
  } else {
    throw HttpError(
        400, fmt::format("\"stop\" is {} {}: {}", type_of(v),
                         v.is_array() ? fmt::format("of {} items", v.size()) : shown(v), expected));
  }
  for (const std::string& s : stop)
    if (s.empty())
      throw HttpError(400, fmt::format("\"stop\" holds an empty string: {}", expected));
  if (!stop.empty() && !card.tokenizer)
    throw HttpError(400,
                    "\"stop\" matches text and this server has no tokenizer (tandem serve "
                    "--tokenizer): leave \"stop\" out");
  return stop;
}

// "stream_options": {"include_usage": bool}; ignored without "stream": true.
bool include_usage_of(const json& body, bool stream) {
  if (!body.contains("stream_options")) return false;
  const json& v = body["stream_options"];
  if (!v.is_object())
    throw HttpError(400, fmt::format("\"stream_options\" must be an object {{\"include_usage\": "
                                     "true or false}}, found {}",
                                     type_of(v)));
  for (const auto& [key, value] : v.items())
    if (key != "include_usage")
      throw HttpError(400, fmt::format("unknown field \"stream_options\".\"{}\": expected "
                                       "include_usage",
                                       key.substr(0, 64)));
  return bool_field(v, "include_usage", false) && stream;  // without a stream: nothing to add
}

// OpenAI's fields tandem accepts only with the values that ask for nothing it lacks.
void check_openai_fields(const json& body) {
  const auto refuse = [&](const char* name, const std::string& why) {
    throw HttpError(400, fmt::format("\"{}\" is {}: {}", name, shown(body[name]), why));
  };
  if (body.contains("logprobs"))
    refuse("logprobs", "tandem returns no log probabilities (expected null)");
  if (bool_field(body, "echo", false))
    refuse("echo", "tandem does not echo the prompt (expected false)");
  for (const char* name : {"presence_penalty", "frequency_penalty"}) {
    if (!body.contains(name)) continue;
    const json& v = body[name];
    if (!v.is_number() || v.get<double>() != 0)
      refuse(name, "tandem applies no penalties (expected 0)");
  }
  if (body.contains("user") && !body["user"].is_string())
    throw HttpError(400, fmt::format("\"user\" must be a string, found {}", type_of(body["user"])));
  if (body.contains("best_of") && body["best_of"] != 1)
    refuse("best_of", "tandem does not rank candidates (expected 1)");
  if (body.contains("logit_bias") &&
      (!body["logit_bias"].is_object() || !body["logit_bias"].empty()))
    refuse("logit_bias", "tandem applies no logit bias (expected {} or null)");
  if (body.contains("suffix") &&
      (!body["suffix"].is_string() || !body["suffix"].get<std::string>().empty()))
    refuse("suffix", "tandem does not insert text after the completion (expected null)");
}

}  // namespace

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
    for (const char* f : kOpenAiFields) known = known || key == f;
    if (!known)
      throw HttpError(
          400, fmt::format("unknown field \"{}\": expected prompt, max_tokens, temperature, top_k, "
                           "top_p, n, stop, stream, seed or model (or OpenAI's stream_options, "
                           "logprobs, echo, presence_penalty, frequency_penalty, user, best_of, "
                           "logit_bias, suffix)",
                           key.substr(0, 64)));
  }
  // null is the default of every field but the prompt, as OpenAI's clients send it.
  for (auto it = body.begin(); it != body.end();)
    it = it.value().is_null() && it.key() != "prompt" ? body.erase(it) : std::next(it);
  if (body.contains("model") && !body["model"].is_string())
    throw HttpError(400,
                    fmt::format("\"model\" must be a string, found {}", type_of(body["model"])));
  check_openai_fields(body);
  CompletionRequest r;
  CompletionSpec& spec = r.spec;
  spec.prompt = prompt_of(body, card);
  const int64_t t = static_cast<int64_t>(spec.prompt.size()), room = card.gpt.block_size - t;
  if (room < 0)
    throw HttpError(
        400, fmt::format("\"prompt\" has {} tokens: expected at most the model's {} positions", t,
                         card.gpt.block_size));
  const int64_t hi = std::min(room, max_tokens_cap);
  nn::GenerateOptions& o = spec.options;
  o.max_new_tokens = integer_field(
      body, "max_tokens", std::min<int64_t>(16, hi), 0, hi,
      room <= max_tokens_cap
          ? fmt::format(" (a prompt of {} tokens leaves {} of the model's {} positions)", t, room,
                        card.gpt.block_size)
          : fmt::format(" (the server's --max-completion-tokens)"));
  if (body.contains("temperature")) {
    const json& v = body["temperature"];
    if (!v.is_number() || v.get<double>() < 0)
      throw HttpError(
          400, fmt::format("\"temperature\" is {}: expected a number >= 0 (0 = greedy)", shown(v)));
    o.sampling.temperature = v.get<double>();
  }
  o.sampling.top_k = integer_field(body, "top_k", 0, 0, INT64_MAX, " (0 = every token)");
  if (body.contains("top_p")) {
    const json& v = body["top_p"];
    if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() <= 1))
      throw HttpError(400, fmt::format("\"top_p\" is {}: expected a number in (0, 1] (1 = every "
                                       "token)",
                                       shown(v)));
    o.sampling.top_p = v.get<double>();
  }
  o.sampling.seed = static_cast<uint64_t>(integer_field(body, "seed", 0, 0, INT64_MAX));
  o.eos_id = card.tokenizer ? card.tokenizer->eos_id() : -1;
  spec.n = integer_field(body, "n", 1, 1, kMaxChoices, " (choices per request)");
  spec.stop = stop_of(body, card);
  r.stream = bool_field(body, "stream", false);
  r.include_usage = include_usage_of(body, r.stream);
  nn::check_generate(card.gpt, spec.prompt, o);
  return r;
}

}  // namespace tandem::serve
