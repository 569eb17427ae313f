// Language models for the serving tests: transformers' random GPT-2 (vocabulary 64, 32
// positions, no tokenizer), a GPT of any size with tandem's own initialisation, a tokenizer of
// a made-up English-like corpus (vocabulary 300) and a server answering with one of them.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "data/temp_dir.h"
#include "data/text_corpus.h"
#include "serve/serve_test_util.h"
#include "tandem/data/tokenizer.h"
#include "tandem/nn/generate/gpt_weights.h"

namespace tandem::testing {

inline const std::string kHfInit = TANDEM_SOURCE_DIR "/tests/golden/gpt2_hf_init.safetensors";

/// `tensors` as a published snapshot of `version`.
inline std::shared_ptr<serve::ServedWeights> snapshot_of(NamedTensors tensors,
                                                         int64_t version = 0) {
  auto w = std::make_shared<serve::ServedWeights>();
  w->version = version;
  w->weights = serve::host_weights(std::move(tensors));
  return w;
}

/// The state of a GPT of sizes `config` as tandem initialises it.
inline NamedTensors gpt_tensors(const nn::GptConfig& config) {
  nn::Gpt model(config);
  NamedTensors t;
  for (const nn::NamedTensor& n : model.state_dict()) t.emplace_back(n.name, n.tensor.clone());
  return t;
}

/// tokenizer.model of 300 tokens for word_corpus(900, 7), made once per test program.
inline const std::string& corpus_tokenizer() {
  static TempDir dir;
  static const std::string path = [] {
    const std::string corpus = dir.file("corpus.txt");
    std::ofstream(corpus) << word_corpus(900, 7);
    data::TokenizeOptions o;
    o.corpus = {corpus};
    o.out_dir = dir.file("tok");
    o.vocab_size = 300;
    o.num_threads = 1;
    return data::tokenize_corpus(o).model_path;
  }();
  return path;
}

/// A server for `card` with `max_completion_tokens`, answering with `w`.
inline std::unique_ptr<serve::InferenceServer> lm_server(const train::ModelCard& card,
                                                         std::shared_ptr<serve::ServedWeights> w,
                                                         int64_t max_completion_tokens) {
  serve::ServeOptions o;
  o.max_completion_tokens = max_completion_tokens;
  o.batcher.threads = 1;
  auto s = start_server(card, o);
  s->publish(std::move(w));
  return s;
}

/// A served language model and a client of it, for fixtures.
class ServedLm : public ::testing::Test {
 protected:
  void serve(train::ModelCard card, std::shared_ptr<serve::ServedWeights> w,
             int64_t max_completion_tokens) {
    card_ = std::move(card);
    server_ = lm_server(card_, std::move(w), max_completion_tokens);
    cli_ = client_of(*server_);
  }
  /// transformers' random GPT-2 (kHfInit, 2 heads, no tokenizer).
  void serve_hf_init(int64_t max_completion_tokens) {
    NamedTensors t = load_safetensors(kHfInit);
    const nn::GptConfig config = nn::gpt_config_of(t, {}, 2, kHfInit);
    serve(train::language_model_card("gpt2", config, ""), snapshot_of(std::move(t)),
          max_completion_tokens);
  }
  /// The answer to POST /v1/completions with `body`, expected 200.
  nlohmann::json post(const nlohmann::json& body) {
    auto r = cli_->Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return nlohmann::json();
    EXPECT_EQ(r->status, 200) << r->body;
    return nlohmann::json::parse(r->body);
  }
  train::ModelCard card_;
  std::unique_ptr<serve::InferenceServer> server_;
  std::unique_ptr<httplib::Client> cli_;
};

}  // namespace tandem::testing
