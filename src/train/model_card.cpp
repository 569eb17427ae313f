#include "tandem/train/model_card.h"

#include <algorithm>
#include <filesystem>

#include "tandem/error.h"
#include "tandem/nn/generate/gpt_weights.h"
#include "tandem/train/trainer.h"
#include "train/data_recipe.h"
#include "train/run_builder.h"
#include "train/weights.h"

namespace tandem::train {

ModelCard make_model_card(const data::Dataset& set, data::DatasetFormat format, const TrainConfig& cfg) {
  TrainConfig eval_cfg = cfg;
  eval_cfg.augment = false;  // only the evaluation transform is used; its text then says so
  const Transforms t = make_transforms(set, format, eval_cfg);
  ModelCard card;
  card.model = cfg.model;
  card.spec = model_spec(set, *t.eval);
  card.sample_dims = set.dims();
  card.eval_transform = t.eval;
  card.transform_text = t.describe;
  for (int64_t c = 0; c < card.spec.num_classes; ++c) card.class_names.push_back(set.class_name(c));
  return card;
}

std::string find_tokenizer(const std::string& flag, const std::string& data_dir,
                           const std::string& weights,
                           const std::map<std::string, std::string>& metadata) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!flag.empty()) {
    TD_CHECK(fs::is_regular_file(flag, ec), ErrorCode::io, "generate",
             "--tokenizer {}: {} (expected a tokenizer.model written by tandem tokenize)", flag,
             fs::exists(flag, ec) ? "not a regular file" : "no such file");
    return flag;
  }
  if (!data_dir.empty() && fs::is_regular_file(fs::path(data_dir) / "tokenizer.model", ec))
    return (fs::path(data_dir) / "tokenizer.model").string();
  if (const auto it = metadata.find("tokenizer");
      it != metadata.end() && fs::is_regular_file(it->second, ec))
    return it->second;
  const fs::path beside = fs::path(weights).parent_path() / "tokenizer.model";
  if (!weights.empty() && fs::is_regular_file(beside, ec)) return beside.string();
  return "";
}

ModelCard language_model_card(const std::string& model_name, const nn::GptConfig& gpt,
                              const std::string& tokenizer_path) {
  ModelCard card;
  card.model = model_name;
  card.gpt = gpt;
  card.spec.num_classes = gpt.vocab_size;
  card.spec.block_size = gpt.block_size;
  card.spec.n_positions = gpt.block_size;
  card.spec.n_layer = gpt.n_layer;
  card.spec.n_head = gpt.n_head;
  card.spec.n_embd = gpt.n_embd;
  card.spec.channels = card.spec.height = card.spec.width = 0;
  card.sample_dims = {0, 0, 0};
  card.transform_text = "token ids";
  if (!tokenizer_path.empty()) {
    auto tok = std::make_shared<const data::Tokenizer>(tokenizer_path);
    TD_CHECK_ARG(tok->vocab_size() <= gpt.vocab_size, "generate",
                 "tokenizer {} has {} tokens but the model only {}: expected the tokenizer the "
                 "model was trained "
                 "with (--tokenizer)",
                 tokenizer_path, tok->vocab_size(), gpt.vocab_size);
    card.tokenizer = std::move(tok);
    card.tokenizer_path = tokenizer_path;
  }
  return card;
}

ModelCard load_model_card(const TrainConfig& cfg, NamedTensors& weights,
                          const std::string& tokenizer) {
  try {
    nn::check_model_name(cfg.model);
  } catch (const Error& e) {
    rethrow_naming_flag(e, "serve", "--model", cfg.model);
  }
  std::map<std::string, std::string> metadata;
  weights = load_safetensors(cfg.weights, &metadata);
  const bool gpt_file = std::any_of(weights.begin(), weights.end(), [](const auto& t) {
    return t.first == "transformer.wte.weight";
  });
  if (nn::is_sequence_model(cfg.model) || (gpt_file && metadata.find("model") == metadata.end())) {
    const nn::GptConfig gpt = nn::gpt_config_of(weights, metadata, cfg.n_head, cfg.weights);
    const auto saved = metadata.find("model");
    const std::string name = saved != metadata.end() ? saved->second : "gpt2";
    ModelCard card = language_model_card(
        name, gpt, find_tokenizer(tokenizer, cfg.data_dir, cfg.weights, metadata));
    nn::Gpt model(gpt);
    nn::load_gpt_weights(model, weights, cfg.weights);  // every tensor present with its shape
    return card;
  }
  check_saved_model(metadata, cfg.weights, cfg.model);
  const std::shared_ptr<const data::Dataset> test_set = open_split(cfg, data::Split::test);
  ModelCard card = make_model_card(*test_set, dataset_options(cfg).format, cfg);
  check_saved_spec(metadata, cfg.weights, card.spec, cfg.data_dir);
  // Every tensor present with its shape: load it once into a model built for the card.
  nn::ModulePtr model = nn::make_model(cfg.model, card.spec, cfg.seed);
  load_state(*model, weights, cfg.weights);
  return card;
}

}  // namespace tandem::train
