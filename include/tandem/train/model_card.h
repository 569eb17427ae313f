// ModelCard: what an inference service needs to know of a trained model besides its weights:
// the model's name and input (nn::ModelSpec: [C, H, W] after the evaluation transform, and
// classes), the dataset's raw sample shape (what a request's image must be before the
// transform), the evaluation transform itself (data_recipe.h: the one `tandem eval` applies)
// and the class names. `tandem serve` builds it from --weights and the test split of --data;
// `tandem train --serve` from its run (Trainer::model_card()).
// Thread-safety: an immutable value once built; the transform's apply() is reentrant.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tandem/data/dataset.h"
#include "tandem/data/open_dataset.h"
#include "tandem/data/transform.h"
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
};

/// The card of `set` (a run's test split) in `format` for cfg.model, with the evaluation
/// transform of make_transforms(). Errors as make_transforms and model_spec.
ModelCard make_model_card(const data::Dataset& set, data::DatasetFormat format, const TrainConfig& cfg);

/// For `tandem serve`: loads cfg.weights, checks that it holds cfg.model for the test split of
/// cfg.data_dir (as evaluate_weights does: Error(invalid_argument) / Error(format) naming the
/// file and both), and returns the card and the weights (host tensors, state_dict order).
ModelCard load_model_card(const TrainConfig& cfg, NamedTensors& weights);

}  // namespace tandem::train
