// Completer: text generation for POST /v1/completions, on a thread of its own with the
// serving compute threads (--serve-threads), one request at a time in arrival order. It holds
// a host nn::Gpt and its key/value-cache decoder (nn/generate/gpt_decoder.h: f32 on the CPU,
// which is why --serve-device must be cpu for a language model) and loads a snapshot's weights
// when a request was admitted with a version other than the loaded one, so each request is
// answered by the version it was admitted with (weights_slot.h). Requests are not batched: a
// GPT step for one sequence already reads all the weights, and one sequence at a time keeps
// every answer independent of the others.
// Thread-safety: submit() from any thread; the destructor (on any thread but its own) answers
// requests still queued with HttpError 503 and joins.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
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

/// One answered completion: the new token ids, why it ended ("length" or "stop"), the
/// version that answered and the prompt's length in tokens.
struct Completion {
  std::vector<int64_t> tokens;
  std::string finish_reason;
  int64_t version = 0;
  int64_t prompt_tokens = 0;
  double seconds = 0;  // generation time, prefill included
};

class Completer {
 public:
  /// Starts the thread and builds the model for card.gpt on it. Throws
  /// Error(invalid_argument) naming --serve-threads for a thread count outside 1..1024 and
  /// Error(not_available) naming --serve-device for a device other than cpu.
  Completer(const train::ModelCard& card, BatcherOptions options, ServeMetrics* metrics);
  ~Completer();
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;

  /// Queues a generation after `prompt` (checked already: nn::check_generate) with weights
  /// `w`. The future holds the completion or the error (HttpError 503 when stopping; a
  /// snapshot whose tensors are not the model's: Error(format)). Throws HttpError 503 when
  /// options.max_queue requests wait already.
  std::future<Completion> submit(std::vector<int64_t> prompt, nn::GenerateOptions options,
                                 std::shared_ptr<const ServedWeights> w);
  /// e.g. "cpu (generation thread, 2 threads)".
  const std::string& describe() const { return describe_; }

 private:
  struct Job {
    std::vector<int64_t> prompt;
    nn::GenerateOptions options;
    std::shared_ptr<const ServedWeights> weights;
    std::promise<Completion> done;
  };
  void loop(std::promise<void>& ready);

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
