// The inference service on the command line: `tandem serve` (tools/serve_command.cpp) and
// `tandem train --serve` (tools/train_serving.cpp). The serving flags live here and are
// shared by both commands.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "tandem/serve/server.h"
#include "tandem/train/config.h"
#include "tandem/train/trainer.h"

namespace tandem::tools {

struct ServingFlags {
  serve::ServeOptions options;
  std::string serve;           // train --serve HOST:PORT ("" = no serving)
  std::string port_file;       // --port-file: where the bound port is written once listening
  int64_t publish_every = 50;  // train --serve: steps between weight publishes
  int64_t online_buffer = 4096;  // train --serve: capacity of the online sample buffer
  std::string tokenizer;         // serve --tokenizer: a GPT's tokenizer.model ("" = looked for)
};
ServingFlags& serving_flags();

/// --serve-token, --max-body-mb, --timeout-s, --request-timeout-s, --http-threads,
/// --max-connections, --top-k, --resize, --max-batch,
/// --max-delay-ms, --serve-device, --serve-threads, --max-completion-tokens, --port-file.
void add_serving_options(CLI::App* c);
/// `tandem serve --weights FILE --listen HOST:PORT`.
void add_serve_command(CLI::App& app, train::TrainConfig& cfg);
int run_serve(const train::TrainConfig& cfg);

/// Writes `port` to `path` (atomically) when a path is given.
void write_port_file(const std::string& path, int port);

/// tandem train --serve: the server beside a Trainer. It publishes version 0 (the initial
/// weights) at once, then every --publish-every steps and after each evaluation; POST
/// /v1/samples fills the buffer training mixes from (--online-mix); /metrics shows the run.
class TrainServing {
 public:
  /// Throws Error(invalid_argument) naming the flag for bad serving flags or a serving device
  /// that cannot run beside the training device (compute_stream.h).
  TrainServing(train::Trainer& trainer, const train::TrainConfig& cfg);
  ~TrainServing();
  /// Wraps the callbacks (on_step_done, on_window, on_epoch_end) to publish and report.
  void attach(train::TrainCallbacks& cb);
  /// After fit(): one line of what was served; stops the server.
  void finish();
  serve::InferenceServer& server() { return *server_; }

 private:
  void publish(int64_t step, double test_accuracy);
  train::Trainer& trainer_;
  train::TrainConfig cfg_;
  std::shared_ptr<serve::OnlineBuffer> online_;
  std::unique_ptr<serve::InferenceServer> server_;
  serve::TrainingGauges gauges_;
  double test_accuracy_ = -1;
  int64_t published_ = 0;
  int64_t last_step_ = 0;
  bool language_model_ = false;  // a GPT: /v1/completions, no online buffer
};

/// --serve with --zero 3 on a rank other than 0 (which serves): takes part in the weight
/// gathers of rank 0's publishing (Trainer::capture_weights, a collective) at the same points
/// as TrainServing: at once, every --publish-every steps and at each epoch's end. Wraps
/// on_step_done and on_epoch_end; the copies are dropped.
void follow_publishing(train::Trainer& trainer, train::TrainCallbacks& cb);

}  // namespace tandem::tools
