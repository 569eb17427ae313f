// InferenceServer: the HTTP inference service of `tandem serve` and `tandem train --serve`,
// on cpp-httplib (Debian libcpp-httplib-dev). Endpoints (every answer JSON except /metrics and a
// streamed completion;
// every error one line {"error":{"status":S,"message":"..."}}):
//   POST /v1/predict   one image (PNG/JPEG bytes, or a JSON array [C, H, W]) or several (a
//                      JSON array [N, C, H, W], or multipart/form-data with one image per
//                      part, answered in body order, at most kMaxRequestParts); ?top_k=K (default
//                      5, at most the classes). Answers
//                      {"version", "model", "predictions": [{"class", "name", "probability",
//                      "top_k": [{"class", "name", "probability"}...]}...]}.
//                      An image classifier only: on a language model it answers 400.
//   POST /v1/completions  a language model (GPT weights) only, else 400: the JSON body of
//                      OpenAI's completions: {"prompt": "text" or [ids], "max_tokens": N
//                      (default 16; at most the positions the prompt leaves and
//                      --max-completion-tokens), "temperature": T (default 1; 0 greedy),
//                      "top_k": K (default 0: every token), "top_p": P (in (0, 1], default 1:
//                      no nucleus), "n": choices (1..16, default 1; choice i samples with seed
//                      + i), "stop": a string or up to 4 (the text ends before the first one
//                      it holds; needs a tokenizer), "stream": true/false, "seed": S (default
//                      0), "model": ignored}; OpenAI's other fields are accepted with the
//                      values that ask for nothing tandem lacks (logprobs null, echo false,
//                      presence_penalty and frequency_penalty 0, best_of 1, logit_bias {},
//                      suffix null or "", user any string: ignored; stream_options
//                      {"include_usage"}: honoured when streaming) and refused otherwise; null
//                      is a field's default; any other field is refused. Generates with the
//                      key/value cache (nn/generate), stopping at the tokenizer's end-of-text
//                      id, and answers {"id", "object": "text_completion", "created", "model",
//                      "version", "choices": [{"index", "text" (null without a tokenizer),
//                      "logprobs": null, "token_ids", "finish_reason": "length" or
//                      "stop"}...], "usage": {"prompt_tokens", "completion_tokens" (all
//                      choices), "total_tokens"}, "seconds"}. With "stream": true the answer
//                      is text/event-stream: "data: {chunk}\n\n" per token as it is made (the
//                      chunk's choices: [{"index", "text", "logprobs": null, "finish_reason":
//                      null, or the reason on the choice's last chunk, "token_ids": [id]}]),
//                      the usage chunk if asked, then "data: [DONE]\n\n"; a client that hangs
//                      up stops the generation. The same weights and fields give the same
//                      choices.
//   GET  /v1/model     model, input and sample shapes, classes, version, last test accuracy,
//                      serving settings, the online buffer; for a language model its sizes
//                      (vocab_size, n_positions, n_layer, n_head, n_embd), tokenizer and
//                      max_completion_tokens instead of the image fields.
//   POST /v1/samples   labelled samples for training: JSON [{"label": L, "pixels": [C, H, W]}...]
//                      (or one such object), or image bytes with ?label=L; all validated before
//                      any is added (404 when no run trains behind the server).
//   GET  /healthz      200 while the process serves; GET /readyz 200 once weights are
//                      published, else 503.
//   GET  /metrics      Prometheus text (metrics.h).
// Statuses: 400 undecodable/truncated image, wrong shape (unless --resize), bad JSON, bad
// parameter or field (the message names it), an endpoint of the other kind of model; 401 missing or
// wrong bearer token (--serve-token; /healthz and /readyz are open); 404 unknown path; 405 wrong
// method (with Allow); 413 body over --max-body-mb; 503 no weights yet or the queue is full; a
// client that stalls longer than --timeout-s while sending, or whose request has not fully arrived
// --request-timeout-s after its first byte (one trickling bytes), is cut off (400 when it sent part
// of a request) and its connection closed. Each open connection has a thread of its own (up to
// --max-connections), so slow clients never hold up others. The server keeps serving after each.
// Thread-safety: publish(), metrics() and online() from any thread; start() and stop() from
// one controlling thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tandem/serve/batcher.h"
#include "tandem/serve/completer.h"
#include "tandem/serve/metrics.h"
#include "tandem/serve/online_buffer.h"
#include "tandem/serve/weights_slot.h"
#include "tandem/train/model_card.h"

namespace tandem::serve {

struct ServeOptions {
  std::string listen = "127.0.0.1:8080";  // HOST:PORT (--listen / --serve); port 0 = any free port
  std::string token_file;                 // --serve-token: file whose first line is the bearer token
  double max_body_mb = 16;                // --max-body-mb: largest request body, MiB
  double timeout_s = 5;                   // --timeout-s: limit of each read and write of a connection, seconds, [0.01, 3600]
  double request_timeout_s = 30;          // --request-timeout-s: longest a request may take to arrive, seconds, [0.01, 3600]
  int http_threads = 8;                   // --http-threads: connection threads kept ready
  int max_connections = 256;              // --max-connections: connections served at once, a thread each
  int top_k = 5;                          // default classes per answer
  bool resize = false;                    // --resize: resize images of another size
  BatcherOptions batcher;                 // --max-batch, --max-delay-ms, --serve-device, --serve-threads
  int64_t max_completion_tokens =
      256;  // --max-completion-tokens: most tokens one completion makes, >= 1
};

/// Splits "HOST:PORT" (port 0..65535). Throws Error(invalid_argument) naming `flag`.
void parse_listen(const std::string& text, const char* flag, std::string& host, int& port);

class InferenceServer {
 public:
  /// Validates the options (Error(invalid_argument) naming the flag; Error(io) for an
  /// unreadable or empty token file) and starts the batcher (its errors propagate).
  /// `online`: the buffer POST /v1/samples fills (null: no run behind the server);
  /// `online_mix`: the share training takes from it, shown by /v1/model and /metrics.
  InferenceServer(train::ModelCard card, ServeOptions options, std::shared_ptr<OnlineBuffer> online = nullptr,
                  double online_mix = 0);
  ~InferenceServer();
  InferenceServer(const InferenceServer&) = delete;
  InferenceServer& operator=(const InferenceServer&) = delete;

  /// Binds and starts answering on a thread of its own. Throws Error(io) naming the address
  /// when it cannot bind (in use, not local).
  void start();
  /// The bound port (after start()).
  int port() const { return port_; }
  const std::string& host() const { return host_; }
  /// Stops accepting, finishes the requests being answered, joins. Idempotent.
  void stop();

  /// Makes `w` the version that answers requests admitted from now on.
  void publish(std::shared_ptr<const ServedWeights> w);
  WeightsSlot& weights() { return slot_; }
  ServeMetrics& metrics() { return metrics_; }
  const train::ModelCard& card() const { return card_; }
  const ServeOptions& options() const { return opt_; }
  OnlineBuffer* online() { return online_.get(); }
  double online_mix() const { return online_mix_; }
  /// The serving device and stream, e.g. "cpu (inline on the calling thread, 1 thread)".
  const std::string& device_text() const {
    return completer_ ? completer_->describe() : batcher_->describe();
  }
  /// The image batcher; only for an image classifier (card().language_model() false).
  DynamicBatcher& batcher() { return *batcher_; }
  /// The generation thread; only for a language model (card().language_model() true).
  Completer& completer() { return *completer_; }
  /// True when `header` (an Authorization value) carries the token, or no token is required.
  bool authorized(const std::string& header) const;

 private:
  struct Http;
  train::ModelCard card_;
  ServeOptions opt_;
  std::shared_ptr<OnlineBuffer> online_;
  double online_mix_;
  std::string token_;
  std::string host_;
  int port_ = 0;
  ServeMetrics metrics_;
  WeightsSlot slot_;
  std::unique_ptr<DynamicBatcher> batcher_;
  std::unique_ptr<Completer> completer_;
  std::unique_ptr<Http> http_;
};

}  // namespace tandem::serve
