// Completer: text generation for POST /v1/completions, on a thread of its own with the
// serving compute threads (--serve-threads), one request at a time in arrival order. It holds
// a host nn::Gpt and its key/value-cache decoder (nn/generate/gpt_decoder.h: f32 on the CPU,
// which is why --serve-device must be cpu for a language model) and loads a snapshot's weights
// when a request was admitted with a version other than the loaded one, so each request is
// answered by the version it was admitted with (weights_slot.h). Requests are not batched: a
// GPT step for one sequence already reads all the weights, and one sequence at a time keeps
// every answer independent of the others.
// A request asks for n choices, generated one after another, each its own sample (choice i
// draws with seed + i), each ending at max_tokens, the end-of-text id or a stop string; a
// callback sees every token as it is made (for streaming) and can stop the request.
// Thread-safety: submit() from any thread; the destructor (on any thread but its own) answers
// requests still queued with HttpError 503 and joins. Callbacks run on the generation thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tandem/nn/generate/generate.h"
#include "tandem/serve/batcher.h"
#include "tandem/serve/metrics.h"
#include "tandem/serve/weights_slot.h"
#include "tandem/train/model_card.h"

namespace tandem::serve {

/// What to generate: `n` choices after `prompt` (checked already: nn::check_generate); choice
/// i uses `options` with sampling.seed + i, so each is the choice 0 of the same request with
/// that seed. `stop`: strings that end a choice once its decoded text holds one (the text is
/// cut before it); they need the card's tokenizer and are ignored without one.
struct CompletionSpec {
  std::vector<int64_t> prompt;
  nn::GenerateOptions options;
  int64_t n = 1;  // >= 1
  std::vector<std::string> stop;
};

/// One choice: every token made (with the end-of-text id or the token that completed a stop
/// string), its text (empty without a tokenizer; cut before a stop string) and why it ended:
/// "length" (max_tokens) or "stop" (end-of-text id or a stop string).
struct CompletionChoice {
  std::vector<int64_t> tokens;
  std::string text;
  std::string finish_reason;
};

/// One answered completion: the choices in order, the version that answered and the prompt's
/// length in tokens.
struct Completion {
  std::vector<CompletionChoice> choices;
  int64_t version = 0;
  int64_t prompt_tokens = 0;
  double seconds = 0;  // generation time of all choices, prefill included
  /// Tokens made by all choices.
  int64_t completion_tokens() const;
};

/// One step of a choice, as it is made: the token (-1 for the single step of a choice of no
/// tokens, max_tokens 0), the text it releases (see ChoiceText in src/serve/choice_text.h: text
/// that could still begin a stop string is held back until it cannot; empty without a
/// tokenizer) and, on the choice's last step, its finish_reason ("" before). The texts of a
/// choice's steps concatenate to its CompletionChoice::text.
struct CompletionDelta {
  int64_t index = 0;  // the choice
  int64_t token = -1;
  std::string text;
  std::string finish_reason;
};
/// Called on the generation thread for each step; returning false stops the request (its
/// later tokens and choices are not made; the future still holds what was made).
using DeltaCallback = std::function<bool(const CompletionDelta&)>;

class Completer {
 public:
  /// Starts the thread and builds the model for card.gpt on it. Throws
  /// Error(invalid_argument) naming --serve-threads for a thread count outside 1..1024 and
  /// Error(not_available) naming --serve-device for a device other than cpu.
  Completer(const train::ModelCard& card, BatcherOptions options, ServeMetrics* metrics);
  ~Completer();
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;

  /// Queues the generation of `spec` with weights `w`; `on_delta` (may be empty) sees each
  /// token as it is made. The future holds the completion or the error (HttpError 503 when
  /// stopping; a snapshot whose tensors are not the model's: Error(format)); it is ready only
  /// after the last on_delta call returned. Throws HttpError 503 when options.max_queue
  /// requests wait already.
  std::future<Completion> submit(CompletionSpec spec, std::shared_ptr<const ServedWeights> w,
                                 DeltaCallback on_delta = {});
  /// e.g. "cpu (generation thread, 2 threads)".
  const std::string& describe() const { return describe_; }

 private:
  struct Job {
    CompletionSpec spec;
    std::shared_ptr<const ServedWeights> weights;
    DeltaCallback on_delta;
    std::promise<Completion> done;
  };
  void loop(std::promise<void>& ready);
  // The choices of `job` on `decoder` (weights loaded).
  Completion run(Job& job, nn::GptDecoder& decoder) const;

  train::ModelCard card_;
  BatcherOptions opt_;
  ServeMetrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  std::string describe_;
  std::thread thread_;
};

}  // namespace tandem::serve
