// The request and answer bodies of POST /v1/completions (tandem/serve/server.h documents the
// fields): a JSON request checked field by field (each refusal an HttpError 400 naming the
// field and what was expected), the OpenAI-style answer, and the chunks of a streamed answer.
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/nn/generate/generate.h"
#include "tandem/serve/completer.h"
#include "tandem/train/model_card.h"

namespace tandem::serve {

/// The most choices one request may ask for ("n").
inline constexpr int64_t kMaxChoices = 16;
/// The most stop strings one request may give ("stop"), as OpenAI.
inline constexpr size_t kMaxStops = 4;

struct CompletionRequest {
  CompletionSpec spec;         // prompt (checked against the vocabulary), options (max_tokens,
                               // temperature, top_k, top_p, seed; eos_id the tokenizer's), n, stop
  bool stream = false;         // answer as server-sent events
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
};

/// Parses and checks `body` for the language model of `card`; `max_tokens_cap` is the
/// server's --max-completion-tokens.
CompletionRequest parse_completion_request(const std::string& body, const train::ModelCard& card,
                                           int64_t max_tokens_cap);

/// What every answer and chunk of one request shares: "id" (cmpl-..., unique in the process),
/// "created" (Unix seconds), "model" and the weights "version".
struct CompletionHeader {
  std::string id;
  int64_t created = 0;
  std::string model;
  int64_t version = 0;
};
/// A new header for `card` and weights `version`.
CompletionHeader completion_header(const train::ModelCard& card, int64_t version);

/// The answer: {"id", "object": "text_completion", "created", "model", "version", "choices":
/// [{"index", "text", "logprobs": null, "token_ids", "finish_reason"}...], "usage":
/// {"prompt_tokens", "completion_tokens", "total_tokens"}, "seconds"}; "text" is null without
/// a tokenizer.
std::string completion_json(const train::ModelCard& card, const CompletionHeader& h,
                            const Completion& c);

/// A streamed step: one line "data: {json}\n\n" whose JSON is the header's fields, "object":
/// "text_completion" and "choices": [{"index", "text" (null without a tokenizer), "logprobs":
/// null, "finish_reason" (null before the choice's last step), "token_ids": [id] (none for a
/// choice of no tokens)}].
std::string completion_chunk(const train::ModelCard& card, const CompletionHeader& h,
                             const CompletionDelta& d);
/// The usage chunk of stream_options.include_usage: "choices": [] and "usage".
std::string usage_chunk(const CompletionHeader& h, const Completion& c);

/// Token ids as text with the card's tokenizer; ids the tokenizer does not have (a vocabulary
/// padded beyond it) are left out.
std::string decode_text(const data::Tokenizer& tokenizer, const std::vector<int64_t>& ids);

}  // namespace tandem::serve
