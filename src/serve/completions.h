// The request and answer bodies of POST /v1/completions (tandem/serve/server.h documents the
// fields): a JSON request checked field by field (each refusal an HttpError 400 naming the
// field and what was expected), and the OpenAI-style answer.
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/nn/generate/generate.h"
#include "tandem/serve/completer.h"
#include "tandem/train/model_card.h"

namespace tandem::serve {

struct CompletionRequest {
  std::vector<int64_t> prompt;  // token ids, checked against the vocabulary
  nn::GenerateOptions options;  // max_tokens, temperature, top_k, seed; eos_id the tokenizer's
};

/// Parses and checks `body` for the language model of `card`; `max_tokens_cap` is the
/// server's --max-completion-tokens.
CompletionRequest parse_completion_request(const std::string& body, const train::ModelCard& card,
                                           int64_t max_tokens_cap);

/// The answer: {"object": "text_completion", "model", "version", "choices": [{"index": 0,
/// "text", "token_ids", "finish_reason"}], "usage": {"prompt_tokens", "completion_tokens",
/// "total_tokens"}}; "text" is null without a tokenizer.
std::string completion_json(const train::ModelCard& card, const Completion& c);

/// Token ids as text with the card's tokenizer; ids the tokenizer does not have (a vocabulary
/// padded beyond it) are left out.
std::string decode_text(const data::Tokenizer& tokenizer, const std::vector<int64_t>& ids);

}  // namespace tandem::serve
