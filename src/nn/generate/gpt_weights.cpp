#include "tandem/nn/generate/gpt_weights.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tandem/error.h"
#include "tandem/nn/models.h"

namespace tandem::nn {
namespace {

const Tensor* lookup(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

const Tensor& matrix(const NamedTensors& tensors, const std::string& name,
                     const std::string& what) {
  const Tensor* t = lookup(tensors, name);
  TD_CHECK(t != nullptr, ErrorCode::format, "generate",
           "{} holds no tensor '{}': expected GPT-2 weights with GPT2LMHeadModel's names", what,
           name);
  TD_CHECK(t->dim() == 2, ErrorCode::format, "generate",
           "{}: tensor '{}' has shape {}, expected 2 dimensions", what, name,
           shape_str(t->shape()));
  return *t;
}

// A size recorded in the metadata: -1 when absent.
int64_t recorded(const std::map<std::string, std::string>& metadata, const char* key,
                 const std::string& what) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) return -1;
  const std::string& s = it->second;
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  TD_CHECK(ec == std::errc() && ptr == s.data() + s.size() && v >= 1, ErrorCode::format, "generate",
           "{}: metadata {} is '{}', expected an integer >= 1", what, key, s.substr(0, 32));
  return v;
}

void agree(int64_t recorded_value, int64_t found, const char* key, const char* from,
           const std::string& what) {
  TD_CHECK(recorded_value < 0 || recorded_value == found, ErrorCode::format, "generate",
           "{}: metadata {} is {}, but the tensors say {} ({})", what, key, recorded_value, found,
           from);
}

// n_head of transformers' config.json beside weights file `path` (save_pretrained writes it
// next to model.safetensors); 0 when there is none or it holds no integer n_head.
int64_t n_head_beside(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path config = std::filesystem::path(path).parent_path() / "config.json";
  if (!std::filesystem::is_regular_file(config, ec)) return 0;
  std::ifstream in(config);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("n_head") || !j["n_head"].is_number_integer()) return 0;
  return std::max<int64_t>(0, j["n_head"].get<int64_t>());
}

}  // namespace

GptConfig gpt_config_of(const NamedTensors& tensors,
                        const std::map<std::string, std::string>& metadata, int64_t n_head,
                        const std::string& what) {
  if (const auto m = metadata.find("model"); m != metadata.end() && !is_sequence_model(m->second))
    throw_error(
        ErrorCode::invalid_argument, "generate",
        fmt::format("{} holds weights of model '{}', which is not a GPT: expected one of {}", what,
                    m->second.substr(0, 64), fmt::join(sequence_model_names(), ", ")));
  const Tensor& wte = matrix(tensors, "transformer.wte.weight", what);
  const Tensor& wpe = matrix(tensors, "transformer.wpe.weight", what);
  GptConfig c;
  c.vocab_size = wte.size(0);
  c.n_embd = wte.size(1);
  c.block_size = wpe.size(0);
  TD_CHECK(
      wpe.size(1) == c.n_embd, ErrorCode::format, "generate",
      "{}: transformer.wpe.weight is {} but transformer.wte.weight {}: expected the same width",
      what, shape_str(wpe.shape()), shape_str(wte.shape()));
  c.n_layer = 0;
  while (lookup(tensors, fmt::format("transformer.h.{}.ln_1.weight", c.n_layer))) ++c.n_layer;
  TD_CHECK(c.n_layer >= 1, ErrorCode::format, "generate",
           "{} holds no block 'transformer.h.0.ln_1.weight'", what);
  agree(recorded(metadata, "vocab_size", what), c.vocab_size, "vocab_size",
        "transformer.wte.weight", what);
  agree(recorded(metadata, "n_embd", what), c.n_embd, "n_embd", "transformer.wte.weight", what);
  agree(recorded(metadata, "n_positions", what), c.block_size, "n_positions",
        "transformer.wpe.weight", what);
  agree(recorded(metadata, "n_layer", what), c.n_layer, "n_layer", "the transformer.h.<i> blocks",
        what);
  const int64_t heads = recorded(metadata, "n_head", what);
  if (heads < 0 && n_head <= 0) n_head = n_head_beside(what);
  TD_CHECK_ARG(heads > 0 || n_head > 0, "generate",
               "{} records no n_head (GPT2Config): give --n-head H, or put transformers' config.json beside the "
               "file",
               what);
  c.n_head = heads > 0 ? heads : n_head;
  TD_CHECK_ARG(c.n_embd % c.n_head == 0, "generate", "{}: n_head {} does not divide n_embd {}",
               what, c.n_head, c.n_embd);
  if (const auto e = metadata.find("layer_norm_epsilon"); e != metadata.end()) {
    char* end = nullptr;
    const double eps = std::strtod(e->second.c_str(), &end);
    TD_CHECK(end && *end == '\0' && eps > 0, ErrorCode::format, "generate",
             "{}: metadata layer_norm_epsilon is '{}', expected a number > 0", what,
             e->second.substr(0, 32));
    c.layer_norm_epsilon = static_cast<float>(eps);
  }
  return c;
}

void load_gpt_weights(Gpt& model, const NamedTensors& tensors, const std::string& what) {
  std::set<std::string> used;
  for (const NamedTensor& t : model.state_dict()) {
    const Tensor* src = lookup(tensors, t.name);
    TD_CHECK(src != nullptr, ErrorCode::format, "generate",
             "{}: tensor '{}' {} is not in the weights", what, t.name, shape_str(t.tensor.shape()));
    TD_CHECK(src->shape() == t.tensor.shape(), ErrorCode::format, "generate",
             "{}: tensor '{}' has shape {}, expected {}", what, t.name, shape_str(src->shape()),
             shape_str(t.tensor.shape()));
    const bool widen = src->dtype() == DType::bf16 || src->dtype() == DType::f16;
    TD_CHECK(src->dtype() == DType::f32 || widen, ErrorCode::format, "generate",
             "{}: tensor '{}' is {}, expected f32", what, t.name, dtype_name(src->dtype()));
    Tensor dst = t.tensor;
    dst.copy_from(widen ? src->to(DType::f32) : *src);
    used.insert(t.name);
  }
  for (const auto& [name, t] : tensors) {
    if (used.count(name)) continue;
    if (name.size() > 10 &&
        (name.compare(name.size() - 10, 10, ".attn.bias") == 0 ||
         (name.size() > 17 && name.compare(name.size() - 17, 17, ".attn.masked_bias") == 0)))
      continue;  // transformers' causal-mask buffers of older versions
    if (name == "lm_head.weight") {
      const Tensor& wte = *lookup(tensors, "transformer.wte.weight");
      TD_CHECK(t.shape() == wte.shape() && t.dtype() == wte.dtype() &&
                   std::memcmp(t.raw_data(), wte.raw_data(), t.nbytes()) == 0,
               ErrorCode::format, "generate",
               "{}: lm_head.weight differs from transformer.wte.weight: expected a copy (GPT-2 "
               "ties them)",
               what);
      continue;
    }
    throw_error(ErrorCode::format, "generate",
                fmt::format("{}: tensor '{}' {} is not a GPT-2 weight of this size", what,
                            name.substr(0, 128), shape_str(t.shape())));
  }
}

std::unique_ptr<Gpt> load_gpt(const std::string& path, int64_t n_head, std::map<std::string, std::string>* metadata) {
  std::map<std::string, std::string> meta;
  const NamedTensors tensors = load_safetensors(path, &meta);
  auto model = std::make_unique<Gpt>(gpt_config_of(tensors, meta, n_head, path));
  load_gpt_weights(*model, tensors, path);
  model->eval();
  if (metadata) *metadata = std::move(meta);
  return model;
}

}  // namespace tandem::nn
