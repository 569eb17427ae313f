#include "train/weights.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tandem/error.h"
#include "tandem/nn/models.h"
#include "tandem/safetensors.h"
#include "tandem/train/trainer.h"

namespace tandem::train {

static std::string shape_text(const nn::ModelSpec& s) {
  return fmt::format("{}x{}x{}", s.channels, s.height, s.width);
}

void save_model_weights(const std::string& path, nn::Module& model, const std::string& model_name,
                        const nn::ModelSpec& spec, DType dtype,
                        const std::map<std::string, std::string>& extra_metadata) {
  NamedTensors out;
  for (const nn::NamedTensor& t : model.host_state_dict()) {
    const bool narrow = dtype != DType::f32 && t.tensor.defined() && t.tensor.dtype() == DType::f32;
    out.emplace_back(t.name, narrow ? t.tensor.to(dtype) : t.tensor);
  }
  // Tied state (GPT-2's lm_head.weight): a copy under the alias, as PyTorch's state_dict lists it.
  for (const auto& [alias, source] : model.tied_state()) {
    const std::string& name = source;  // clang-14 lambdas cannot capture structured bindings
    const auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == name; });
    TD_CHECK(it != out.end(), ErrorCode::internal, "train",
             "tied tensor '{}' names '{}', which is not in the state", alias, source);
    out.emplace_back(alias, it->second.clone());
  }
  std::map<std::string, std::string> metadata{{"format", "pt"}, {"model", model_name}};
  if (spec.block_size == 0) {  // images
    metadata["sample_shape"] = shape_text(spec);
    metadata["num_classes"] = std::to_string(spec.num_classes);
  }
  for (const auto& [key, value] : model.config_metadata()) metadata[key] = value;
  for (const auto& [key, value] : extra_metadata) metadata[key] = value;
  save_safetensors(path, out, metadata);
}

void check_saved_spec(const std::map<std::string, std::string>& metadata, const std::string& path,
                      const nn::ModelSpec& spec, const std::string& data_dir) {
  const auto shape = metadata.find("sample_shape"), classes = metadata.find("num_classes");
  const std::string want_shape = shape_text(spec), want_classes = std::to_string(spec.num_classes);
  const bool shape_ok = shape == metadata.end() || shape->second == want_shape;
  const bool classes_ok = classes == metadata.end() || classes->second == want_classes;
  if (shape_ok && classes_ok) return;
  const auto saved = [&](auto it, const std::string& fallback) {
    return it == metadata.end() ? fallback : it->second.substr(0, 64);
  };
  throw_error(ErrorCode::invalid_argument, "eval",
              fmt::format("{} holds a model trained on {} images of {} classes, but --data {} "
                          "holds {} images of {} "
                          "classes: expected the same sample shape and classes",
                          path, saved(shape, want_shape), saved(classes, want_classes), data_dir,
                          want_shape, want_classes));
}

void check_saved_model(const std::map<std::string, std::string>& metadata, const std::string& path,
                       const std::string& model) {
  // tandem records the model in the file: name a mismatch rather than the first odd tensor.
  const auto saved = metadata.find("model");
  if (saved == metadata.end() || saved->second == model) return;
  const std::vector<std::string> names = nn::model_names();
  if (std::find(names.begin(), names.end(), saved->second) != names.end())
    throw_error(ErrorCode::invalid_argument, "eval",
                fmt::format("{} holds weights of model '{}', expected '{}' (--model): pass --model {}", path,
                            saved->second, model, saved->second));
  throw_error(ErrorCode::format, "eval",
              fmt::format("{} records model '{}', which tandem does not know: expected one of {}", path,
                          saved->second.substr(0, 64), fmt::join(names, ", ")));
}

void load_state(nn::Module& module, const NamedTensors& state, const std::string& source) {
  for (const nn::NamedTensor& t : module.state_dict()) {
    const Tensor& src = find_tensor(state, t.name, source);
    TD_CHECK(src.shape() == t.tensor.shape(), ErrorCode::format, "weights",
             "{}: tensor '{}' has shape {}, expected {}", source, t.name, shape_str(src.shape()),
             shape_str(t.tensor.shape()));
    // A file saved with --save-dtype bf16 (or f16) widens into the f32 tensors exactly.
    const bool widen = t.tensor.dtype() == DType::f32 && (src.dtype() == DType::bf16 || src.dtype() == DType::f16);
    TD_CHECK(src.dtype() == t.tensor.dtype() || widen, ErrorCode::format, "weights",
             "{}: tensor '{}' is {}, expected {}", source, t.name, dtype_name(src.dtype()),
             dtype_name(t.tensor.dtype()));
    Tensor dst = t.tensor;
    dst.copy_from(widen ? src.to(DType::f32) : src);
  }
}

}  // namespace tandem::train
