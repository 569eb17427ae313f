#include "tandem/train/model_card.h"

#include "tandem/error.h"
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

ModelCard load_model_card(const TrainConfig& cfg, NamedTensors& weights) {
  try {
    nn::check_model_name(cfg.model);
  } catch (const Error& e) {
    rethrow_naming_flag(e, "serve", "--model", cfg.model);
  }
  std::map<std::string, std::string> metadata;
  weights = load_safetensors(cfg.weights, &metadata);
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
