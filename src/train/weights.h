// Model weights as safetensors files: writing a model's state (Trainer::save_weights) and
// checking that a file holds the weights of the model being evaluated.
// Thread-safety: reentrant; a module is used by one thread at a time.
#pragma once

#include <map>
#include <string>

#include "tandem/nn/module.h"

namespace tandem::train {

/// Writes `model`'s state_dict (parameters and buffers, copied to the host) to `path` as
/// safetensors, atomically, with metadata {"format": "pt", "model": model_name}.
void save_model_weights(const std::string& path, nn::Module& model, const std::string& model_name);

/// Throws when the file's metadata records a model other than `model` (--model):
/// Error(invalid_argument) naming both for another known model, Error(format) for a name
/// tandem does not know. A file without the record passes (load_state checks its tensors).
void check_saved_model(const std::map<std::string, std::string>& metadata, const std::string& path,
                       const std::string& model);

}  // namespace tandem::train
