#include "serve/answers.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::serve {

using nlohmann::json;

std::string prediction_json(const train::ModelCard& card, const Prediction& p, int64_t top_k) {
  const int64_t n = p.probabilities.shape()[0], k = p.probabilities.shape()[1];
  const float* probs = p.probabilities.data<float>();
  json predictions = json::array();
  std::vector<int64_t> order(static_cast<size_t>(k));
  for (int64_t i = 0; i < n; ++i) {
    const float* row = probs + i * k;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [row](int64_t a, int64_t b) { return row[a] > row[b]; });
    json top = json::array();
    for (int64_t r = 0; r < top_k; ++r) {
      const int64_t c = order[static_cast<size_t>(r)];
      top.push_back({{"class", c}, {"name", card.class_names[static_cast<size_t>(c)]}, {"probability", row[c]}});
    }
    json one = top[0];
    one["top_k"] = std::move(top);
    predictions.push_back(std::move(one));
  }
  return json{{"version", p.version}, {"model", card.model}, {"predictions", std::move(predictions)}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

std::string model_json(InferenceServer& server) {
  const train::ModelCard& c = server.card();
  const auto w = server.weights().current();
  json online = nullptr;
  if (server.online())
    online = {{"size", server.online()->size()},
              {"capacity", server.online()->capacity()},
              {"mix", server.online_mix()},
              {"added", server.online()->added()},
              {"drawn", server.online()->drawn()}};
  const ServeOptions& o = server.options();
  if (c.language_model()) {
    const nn::GptConfig& g = c.gpt;
    return json{{"model", c.model},
                {"kind", "language_model"},
                {"vocab_size", g.vocab_size},
                {"n_positions", g.block_size},
                {"n_layer", g.n_layer},
                {"n_head", g.n_head},
                {"n_embd", g.n_embd},
                {"tokenizer", c.tokenizer ? json(c.tokenizer_path) : json(nullptr)},
                {"eos_id", c.tokenizer ? json(c.tokenizer->eos_id()) : json(nullptr)},
                {"endpoint", "/v1/completions"},
                {"max_completion_tokens", o.max_completion_tokens},
                {"version", w ? json(w->version) : json(nullptr)},
                {"serve_device", server.device_text()}}
        .dump(-1, ' ', false, json::error_handler_t::replace);
  }
  json j = {{"model", c.model},
            {"kind", "image_classifier"},
            {"input_shape", {c.spec.channels, c.spec.height, c.spec.width}},
            {"sample_shape", {c.sample_dims.channels, c.sample_dims.height, c.sample_dims.width}},
            {"num_classes", c.spec.num_classes},
            {"classes", c.class_names},
            {"transform", c.transform_text},
            {"version", w ? json(w->version) : json(nullptr)},
            {"test_accuracy", w && w->test_accuracy >= 0 ? json(w->test_accuracy) : json(nullptr)},
            {"serve_device", server.device_text()},
            {"max_batch", o.batcher.max_batch},
            {"max_delay_ms", o.batcher.max_delay_ms},
            {"resize", o.resize},
            {"online", online}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string samples_json(InferenceServer& server, int64_t accepted) {
  OnlineBuffer& b = *server.online();
  return json{{"accepted", accepted}, {"buffer_size", b.size()}, {"buffer_capacity", b.capacity()},
              {"online_mix", server.online_mix()}}
      .dump();
}

}  // namespace tandem::serve
