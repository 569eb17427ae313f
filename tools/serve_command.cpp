// `tandem serve --weights FILE --listen HOST:PORT`: answers /v1/predict and the other
// endpoints (tandem/serve/server.h) from a saved model until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <cstdio>

#include <fmt/format.h>

#include "commands.h"
#include "serving.h"
#include "tandem/atomic_file.h"
#include "train/run_builder.h"

namespace tandem::tools {

ServingFlags& serving_flags() {
  static ServingFlags f;
  return f;
}

void add_serving_options(CLI::App* c) {
  serve::ServeOptions& o = serving_flags().options;
  c->add_option("--serve-token", o.token_file, "File whose first line is the bearer token every /v1 and /metrics "
                "request must send (Authorization: Bearer TOKEN)");
  c->add_option("--max-body-mb", o.max_body_mb, "Largest request body in MiB (larger: 413)")->capture_default_str();
  c->add_option("--timeout-s", o.timeout_s,
                "Limit of each read and write of a connection, seconds (a stalled client is cut off)")
      ->capture_default_str();
  c->add_option("--request-timeout-s", o.request_timeout_s,
                "Longest a request (line, headers and body) may take to arrive after its first byte, seconds; "
                "a client still sending then is cut off")
      ->capture_default_str();
  c->add_option("--http-threads", o.http_threads, "Connection threads kept ready")->capture_default_str();
  c->add_option("--max-connections", o.max_connections,
                "Connections served at once, a thread each (more wait for one)")
      ->capture_default_str();
  c->add_option("--top-k", o.top_k, "Classes per answer unless ?top_k= says")->capture_default_str();
  c->add_flag("--resize", o.resize, "Resize images of another size to the model's instead of answering 400");
  c->add_option("--max-batch", o.batcher.max_batch, "Most images per inference batch (dynamic batching)")
      ->capture_default_str();
  c->add_option("--max-delay-ms", o.batcher.max_delay_ms,
                "How long a request waits for others to share its batch, milliseconds")
      ->capture_default_str();
  c->add_option("--serve-device", o.batcher.device,
                "Device of the inference replica: cpu, virt[:N][?...] (own stream) or cuda[:N]")
      ->capture_default_str();
  c->add_option("--serve-threads", o.batcher.threads, "Compute threads of the inference replica")->capture_default_str();
  c->add_option(
       "--max-completion-tokens", o.max_completion_tokens,
       "Language models: most tokens one POST /v1/completions makes (max_tokens above it: 400)")
      ->capture_default_str();
  c->add_option("--port-file", serving_flags().port_file, "Write the port listened on to this file once listening");
}

void add_serve_command(CLI::App& app, train::TrainConfig& cfg) {
  CLI::App* c = app.add_subcommand("serve", "Answer HTTP inference requests from a safetensors weights file");
  add_data_options(c, cfg, true);
  c->add_option("--model", cfg.model, "Model (default: the one recorded in --weights, else fmnist-cnn)")
      ->capture_default_str();
  c->add_option(
       "--weights", cfg.weights,
       "safetensors file written by `tandem train --save` or by PyTorch (GPT weights: answers "
       "/v1/completions)")
      ->required();
  c->add_option(
      "--tokenizer", serving_flags().tokenizer,
      "GPT weights: the tokenizer.model of their text (default: --data DIR's, the one the weights "
      "record, or tokenizer.model beside them; none: prompts as token ids only)");
  c->add_option("--n-head", cfg.n_head,
                "GPT weights that record no GPT2Config (a transformers model.safetensors without "
                "config.json "
                "beside it): attention heads")
      ->capture_default_str();
  c->add_option("--listen", serving_flags().options.listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  add_serving_options(c);
  model_from_weights_unless_given(c, cfg);
  strict_values(c);
}

void write_port_file(const std::string& path, int port) {
  if (path.empty()) return;
  const std::string text = fmt::format("{}\n", port);
  AtomicFile f(path, "serve");
  f.write(text.data(), text.size());
  f.commit();
}

int run_serve(const train::TrainConfig& cfg) {
  // SIGINT and SIGTERM are blocked before any thread starts (threads inherit the mask) and
  // taken by sigwait below: the server then stops cleanly.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  NamedTensors weights;
  train::ModelCard card = train::load_model_card(cfg, weights, serving_flags().tokenizer);
  serve::InferenceServer server(card, serving_flags().options);
  auto w = std::make_shared<serve::ServedWeights>();
  w->weights = serve::host_weights(std::move(weights));
  server.publish(w);
  server.start();
  write_port_file(serving_flags().port_file, server.port());
  if (card.language_model())
    fmt::print(
        "tandem serve: {} from {} (language model: {} tokens, {} positions; tokenizer {}) on "
        "http://{}:{}, "
        "POST /v1/completions, generation on {}, at most {} tokens per completion\n",
        card.model, cfg.weights, card.gpt.vocab_size, card.gpt.block_size,
        card.tokenizer ? card.tokenizer_path : "none: prompts as token ids", server.host(),
        server.port(), server.device_text(), serving_flags().options.max_completion_tokens);
  else
    fmt::print(
        "tandem serve: {} from {} ({}x{}x{} -> {} classes) on http://{}:{}, inference on {}, max "
        "batch {}, "
        "max delay {} ms\n",
        card.model, cfg.weights, card.spec.channels, card.spec.height, card.spec.width,
        card.spec.num_classes, server.host(), server.port(), server.device_text(),
        serving_flags().options.batcher.max_batch, serving_flags().options.batcher.max_delay_ms);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  server.stop();
  const serve::ServeMetrics& m = server.metrics();
  if (card.language_model())
    fmt::print("tandem serve: stopped by signal {} after {} completion requests\n", sig,
               m.requests("/v1/completions"));
  else
    fmt::print("tandem serve: stopped by signal {} after {} predict requests\n", sig,
               m.requests("/v1/predict"));
  return 0;
}

}  // namespace tandem::tools
