// ModelCard: what an inference service needs to know of a trained model besides its weights:
// the model's name and input (nn::ModelSpec: [C, H, W] after the evaluation transform, and
// classes), the dataset's raw sample shape (what a request's image must be before the
// transform), the evaluation transform itself (data_recipe.h: the one `tandem eval` applies)
// and the class names. `tandem serve` builds it from --weights and the test split of --data;
// `tandem train --serve` from its run (Trainer::model_card()). A language model's card (a GPT:
// spec.block_size > 0) holds instead its sizes (nn::GptConfig) and its tokenizer, if one was
// found (find_tokenizer); it needs no data set.
// Thread-safety: an immutable value once built; the transform's apply() is reentrant.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tandem/data/dataset.h"
#include "tandem/data/open_dataset.h"
#include "tandem/data/tokenizer.h"
#include "tandem/data/transform.h"
#include "tandem/nn/gpt.h"
#include "tandem/nn/models.h"
#include "tandem/safetensors.h"
#include "tandem/train/config.h"

namespace tandem::train {

struct ModelCard {
  std::string model;                  // make_model name ("fmnist-cnn", "mlp")
  nn::ModelSpec spec;                 // the model's input [C, H, W] and classes
  data::ImageDims sample_dims;        // the dataset's raw samples [C, H, W]; H = W = 0 when sizes vary
  std::shared_ptr<const data::Transform> eval_transform;  // raw u8 [C, H, W] -> f32 spec [C, H, W]
  std::vector<std::string> class_names;                   // spec.num_classes names
  std::string transform_text;         // e.g. "Fashion-MNIST normalize, no augmentation"
  // Language models only (language_model()): the GPT's sizes, and the tokenizer of its text
  // (null when none was found: prompts and answers are then token ids only).
  nn::GptConfig gpt;
  std::shared_ptr<const data::Tokenizer> tokenizer;
  std::string tokenizer_path;
  /// A GPT (spec.block_size = its n_positions, spec.num_classes = its vocabulary).
  bool language_model() const { return spec.block_size > 0; }
};

/// The card of `set` (a run's test split) in `format` for cfg.model, with the evaluation
/// transform of make_transforms(). Errors as make_transforms and model_spec.
ModelCard make_model_card(const data::Dataset& set, data::DatasetFormat format, const TrainConfig& cfg);

/// For `tandem serve`: loads cfg.weights, checks that it holds cfg.model for the test split of
/// cfg.data_dir (as evaluate_weights does: Error(invalid_argument) / Error(format) naming the
/// file and both), and returns the card and the weights (host tensors, state_dict order).
/// For GPT weights (cfg.model a sequence model, or a file holding transformer.wte.weight) it
/// builds language_model_card() instead, with the sizes of nn::gpt_config_of (cfg.n_head for
/// a file that records none) and the tokenizer find_tokenizer(tokenizer, ...) names, and opens
/// no data set.
ModelCard load_model_card(const TrainConfig& cfg, NamedTensors& weights,
                          const std::string& tokenizer = "");

/// The card of GPT `model_name` of sizes `gpt`, with the tokenizer at `tokenizer_path` ("" for
/// none). Throws the Tokenizer's Error(io)/Error(format) naming the file, and
/// Error(invalid_argument) when the tokenizer has more tokens than the model's vocabulary
/// (it is not the one the model was trained with).
ModelCard language_model_card(const std::string& model_name, const nn::GptConfig& gpt,
                              const std::string& tokenizer_path);

/// Where the tokenizer of a GPT's weights is, first match: `flag` (--tokenizer; Error(io)
/// naming it when the file is missing); DATA_DIR/tokenizer.model for `data_dir` (a token data
/// folder of `tandem tokenize`; "" to skip); the path the weights' metadata records under
/// "tokenizer" (`tandem train --save` on token data writes it); tokenizer.model beside the
/// weights file. "" when none exists.
std::string find_tokenizer(const std::string& flag, const std::string& data_dir,
                           const std::string& weights,
                           const std::map<std::string, std::string>& metadata);

}  // namespace tandem::train
