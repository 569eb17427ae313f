// make_model: the model names and the steps every model gets (init, fusion, no input gradient).
#include <algorithm>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nn/models/families.h"
#include "nn/module_util.h"
#include "tandem/nn/fusion.h"
#include "tandem/nn/gpt.h"
#include "tandem/nn/models.h"

namespace tandem::nn {

static std::vector<std::string> builtin_names() {
  return {"fmnist-cnn", "mlp", "resnet18", "resnet34", "resnet50", "resnet18-cifar"};
}

namespace {
// Models added by register_model, by name.
struct Registered {
  std::mutex mutex;
  std::map<std::string, ModelFactory> factories;
};
Registered& registered() {
  static Registered r;
  return r;
}
}  // namespace

void register_model(const std::string& name, ModelFactory factory) {
  TD_CHECK_ARG(!name.empty(), "model", "register_model: expected a model name, got an empty one");
  TD_CHECK_ARG(factory != nullptr, "model",
               "register_model {}: expected a factory, got an empty one", name);
  const std::vector<std::string> builtin = builtin_names();
  TD_CHECK_ARG(std::find(builtin.begin(), builtin.end(), name) == builtin.end() && !is_sequence_model(name), "model",
               "register_model {}: a built-in model has that name", name);
  Registered& r = registered();
  std::lock_guard<std::mutex> lock(r.mutex);
  TD_CHECK_ARG(r.factories.emplace(name, std::move(factory)).second, "model",
               "register_model {}: a model of that name is registered already", name);
}

std::vector<std::string> model_names() {
  std::vector<std::string> names = builtin_names();
  Registered& r = registered();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

static ModelFactory registered_factory(const std::string& name) {
  Registered& r = registered();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.factories.find(name);
  return it == r.factories.end() ? nullptr : it->second;
}

std::vector<std::string> sequence_model_names() { return gpt_config_names(); }

bool is_sequence_model(const std::string& name) {
  const std::vector<std::string> names = sequence_model_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

int64_t sequence_block_size(const std::string& name) { return gpt_config(name, 1).block_size; }

void check_model_name(const std::string& name) {
  std::vector<std::string> names = model_names();
  if (std::find(names.begin(), names.end(), name) != names.end() || is_sequence_model(name)) return;
  for (const std::string& n : sequence_model_names()) names.push_back(n);
  throw_error(ErrorCode::invalid_argument, "model",
              fmt::format("unknown model '{}' (expected {})", name, fmt::join(names, ", ")));
}

// A GPT over spec.num_classes tokens, for samples of spec.block_size tokens; the spec's sizes
// replace the name's where given.
static ModulePtr make_sequence_model(const std::string& name, const ModelSpec& spec, uint64_t seed) {
  GptConfig c = gpt_config(name, std::max<int64_t>(1, spec.num_classes));
  if (spec.n_layer > 0) c.n_layer = spec.n_layer;
  if (spec.n_head > 0) c.n_head = spec.n_head;
  if (spec.n_embd > 0) c.n_embd = spec.n_embd;
  if (spec.n_positions > 0) c.block_size = spec.n_positions;
  TD_CHECK_ARG(
      spec.block_size >= 1 && spec.block_size <= c.block_size && spec.num_classes >= 1, "model",
      "{}: expected token data with 1 to {} tokens per sample and a vocabulary of at least 1, "
      "found {}",
      name, c.block_size,
      spec.block_size == 0
          ? fmt::format("{}x{}x{} images", spec.channels, spec.height, spec.width)
          : fmt::format("{} tokens per sample and {} tokens", spec.block_size, spec.num_classes));
  auto m = std::make_shared<Gpt>(c);
  m->init_parameters(seed);
  m->parameters();  // full names on every Parameter
  return m;
}

ModulePtr make_model(const std::string& name, const ModelSpec& spec, uint64_t seed) {
  check_model_name(name);
  if (is_sequence_model(name)) return make_sequence_model(name, spec, seed);
  TD_CHECK_ARG(spec.block_size == 0, "model", "{}: expected images, found token data ({} tokens per sample)", name,
               spec.block_size);
  TD_CHECK_ARG(spec.channels >= 1 && spec.height >= 1 && spec.width >= 1 && spec.num_classes >= 1, "model",
               "{}: expected a sample shape and a class count of at least 1, found {}x{}x{} and {} classes", name,
               spec.channels, spec.height, spec.width, spec.num_classes);
  ModulePtr m;
  if (const ModelFactory factory = registered_factory(name)) {
    m = factory(spec);
    TD_CHECK_ARG(m != nullptr, "model", "{}: its factory (register_model) returned no module",
                 name);
  } else {
    m = name == "fmnist-cnn" ? models::fmnist_cnn(spec)
        : name == "mlp"      ? models::mlp(spec)
                             : models::resnet(name, spec);
  }
  m->init_parameters(seed);
  fuse_batch_norm_relu(*m);
  m->set_needs_input_grad(false);  // the input is data
  m->parameters();                 // full names on every Parameter (containers name them locally first)
  return m;
}

ModulePtr make_model(const std::string& name, uint64_t seed) { return make_model(name, ModelSpec{}, seed); }

ModulePtr make_model_lazy(const std::string& name, const ModelSpec& spec, uint64_t seed, ValueSource* values) {
  std::unordered_map<const Parameter*, ParamInit> inits;
  struct Scope {
    explicit Scope(std::unordered_map<const Parameter*, ParamInit>* r) {
      detail::shape_only = true;
      detail::recorded_inits = r;
    }
    ~Scope() {
      detail::shape_only = false;
      detail::recorded_inits = nullptr;
    }
  } scope(values ? &inits : nullptr);
  ModulePtr m = make_model(name, spec, seed);
  if (values) *values = recorded_init_source(std::move(inits));
  return m;
}

ModulePtr make_model_shapes(const std::string& name, const ModelSpec& spec) {
  return make_model_lazy(name, spec, 0, nullptr);
}

}  // namespace tandem::nn
