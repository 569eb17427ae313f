#include "train/place/placed_model.h"

#include <algorithm>

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/profile/profiler.h"

namespace tandem::train {

namespace {

// Whether `prefix` names module `name` or something inside it ("layer4.0" inside "layer4").
bool within(const std::string& prefix, const std::string& name) {
  return prefix == name || (!name.empty() && prefix.size() > name.size() && prefix.compare(0, name.size(), name) == 0 &&
                            prefix[name.size()] == '.');
}

}  // namespace

std::vector<std::pair<std::string, std::string>> place_entries(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t pos = 0; pos <= text.size();) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string entry = text.substr(pos, comma - pos);
    pos = comma + 1;
    const size_t eq = entry.find('=');
    TD_CHECK_ARG(eq != std::string::npos && eq > 0, "train",
                 "--place {}: expected PREFIX=DEVICE entries separated by commas (e.g. 9=cpu), got '{}'", text, entry);
    out.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  TD_CHECK_ARG(!out.empty(), "train", "--place: expected PREFIX=DEVICE entries");
  return out;
}

DeviceSpec place_device(const std::string& text, const std::string& device) {
  try {
    return DeviceSpec::parse(device);
  } catch (const Error& e) {
    throw_error(ErrorCode::invalid_argument, "train", fmt::format("--place {}: {}", text, e.what()));
  }
}

namespace {

// "0..11" for a Sequential's numbered children, else their names.
std::string chain_names(const nn::Sequential& chain) {
  bool numbered = true;
  std::string names;
  for (size_t i = 0; i < chain.size(); ++i) {
    numbered = numbered && chain.name(i) == std::to_string(i);
    if (!chain.name(i).empty()) names += (names.empty() ? "" : ", ") + chain.name(i);
  }
  return numbered ? fmt::format("0..{}", chain.size() - 1) : names;
}

}  // namespace

std::shared_ptr<nn::Sequential> place_chain(const std::string& text, const std::shared_ptr<nn::Sequential>& model) {
  std::vector<std::pair<std::string, nn::ModulePtr>> items;
  std::vector<bool> fused;
  for (size_t i = 0; i < model->size(); ++i) {
    items.emplace_back(model->name(i), (*model)[i]);
    fused.push_back(model->fused_away(i));
  }
  bool expanded = false;
  for (const auto& [prefix, device] : place_entries(text)) {
    for (size_t i = 0; i < items.size();) {
      if (items[i].first == prefix || !within(prefix, items[i].first)) {
        ++i;
        continue;
      }
      auto inner = std::dynamic_pointer_cast<nn::Sequential>(items[i].second);
      if (!inner) {
        // A tensor of a leaf module ("fc.weight") names the module; inside another container
        // (a residual block: a body and a shortcut) the forward is no chain to cut.
        TD_CHECK_ARG(items[i].second->named_children().empty(), "train",
                     "--place {}: prefix '{}' lies inside '{}', whose forward is not a chain of its children (only "
                     "Sequential modules are cut); expected '{}' itself or a module before or after it",
                     text, prefix, items[i].first, items[i].first);
        break;
      }
      // The nested Sequential's children take its place in the chain (the same forward).
      const std::string parent = items[i].first;
      std::vector<std::pair<std::string, nn::ModulePtr>> children;
      std::vector<bool> flags;
      for (size_t k = 0; k < inner->size(); ++k) {
        children.emplace_back(inner->name(k).empty() ? "" : parent + "." + inner->name(k), (*inner)[k]);
        flags.push_back(inner->fused_away(k));
      }
      items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
      items.insert(items.begin() + static_cast<std::ptrdiff_t>(i), children.begin(), children.end());
      fused.erase(fused.begin() + static_cast<std::ptrdiff_t>(i));
      fused.insert(fused.begin() + static_cast<std::ptrdiff_t>(i), flags.begin(), flags.end());
      expanded = true;
    }
  }
  if (!expanded) return model;
  auto chain = std::make_shared<nn::Sequential>(items);
  for (size_t i = 1; i < fused.size(); ++i)
    if (fused[i]) chain->set_fused_away(i, true);
  return chain;
}

std::vector<DeviceSpec> parse_place(const std::string& text, const nn::Sequential& model, Device first) {
  std::vector<DeviceSpec> out(model.size(), DeviceSpec{first, {}});
  size_t next_child = 0;
  for (const auto& [prefix, device] : place_entries(text)) {
    size_t index = model.size();
    for (size_t i = 0; i < model.size() && index == model.size(); ++i)
      if (within(prefix, model.name(i))) index = i;
    // A layer that another entry cut into its blocks (place_chain) stands for its first block.
    for (size_t i = 0; i < model.size() && index == model.size(); ++i)
      if (within(model.name(i), prefix)) index = i;
    TD_CHECK_ARG(index < model.size(), "train",
                 "--place {}: unknown module prefix '{}'; expected one of the model's modules {} (their state_dict "
                 "names)",
                 text, prefix, chain_names(model));
    TD_CHECK_ARG(index >= next_child, "train",
                 "--place {}: module {} is listed out of order or twice; expected prefixes in the model's order", text,
                 prefix);
    const DeviceSpec spec = place_device(text, device);
    for (size_t i = index; i < model.size(); ++i) out[i] = spec;
    next_child = index + 1;
  }
  return out;
}

PlacedModel::PlacedModel(std::shared_ptr<nn::Sequential> model, std::vector<Device> devices)
    : model_(std::move(model)), devices_(std::move(devices)) {
  TD_CHECK_ARG(devices_.size() == model_->size() && !devices_.empty(), "place",
               "expected a device per module ({}), got {}", model_->size(), devices_.size());
  bool found = false;
  for (size_t i = 0; i < model_->size(); ++i) {
    if (!devices_[i].is_host()) {
      (*model_)[i]->to(devices_[i]);
      runtime_for(devices_[i]).current_stream(devices_[i].index).set_label("compute");  // its trace track
    }
    if (!found && !(*model_)[i]->parameters().empty()) {
      first_trainable_ = i;
      found = true;
    }
  }
  needs_input_grad_ = model_->needs_input_grad();
}

PlacedModel::~PlacedModel() {
  // Queued work on the other devices may still read the model's tensors.
  for (Device d : devices_)
    if (!d.is_host()) {
      try {
        runtime_for(d).current_stream(d.index).synchronize();
      } catch (...) {
      }
    }
}

Tensor PlacedModel::forward(const Tensor& x) {
  out_format_.assign(model_->size(), MemoryFormat::contiguous);
  Tensor h = x;
  for (size_t i = 0; i < model_->size(); ++i) {
    if (model_->fused_away(i)) continue;
    // A channels_last activation stays so where the next device keeps the layout.
    const MemoryFormat want = ops::preferred_memory_format(devices_[i], h.dtype()) == MemoryFormat::channels_last
                                  ? h.memory_format()
                                  : MemoryFormat::contiguous;
    h = (*model_)[i]->forward(copier_.cross(h, devices_[i], want));
    out_format_[i] = h.memory_format();
  }
  return h;
}

Tensor PlacedModel::backward(const Tensor& dy) {
  Tensor g = dy;
  for (size_t i = model_->size(); i-- > 0;) {
    if (model_->fused_away(i)) continue;
    // The gradient of layer i's output comes in that output's layout.
    g = (*model_)[i]->backward(copier_.cross(g, devices_[i], out_format_[i]));
    if (!needs_input_grad_ && i == first_trainable_) return Tensor();
  }
  return g;
}

void PlacedModel::collect_parameters(const std::string& prefix, std::vector<nn::Parameter*>& out) {
  model_->collect_parameters(prefix, out);
}
void PlacedModel::collect_state(const std::string& prefix, std::vector<nn::NamedTensor>& out) {
  model_->collect_state(prefix, out);
}
void PlacedModel::reset_parameters(uint64_t seed, uint64_t& index) { model_->reset_parameters(seed, index); }
void PlacedModel::train(bool on) {
  training_ = on;
  model_->train(on);
}
void PlacedModel::set_needs_input_grad(bool on) {
  needs_input_grad_ = on;
  model_->set_needs_input_grad(on);
}
std::string PlacedModel::describe() const { return model_->describe(); }

std::string PlacedModel::describe_placement() const {
  std::string out;
  size_t begin = 0;
  for (size_t i = 1; i <= devices_.size(); ++i) {
    if (i < devices_.size() && devices_[i] == devices_[begin]) continue;
    auto name = [this](size_t k) { return model_->name(k).empty() ? std::to_string(k) : model_->name(k); };
    out += fmt::format("{}{}..{} on {}", out.empty() ? "" : ", ", name(begin), name(i - 1), devices_[begin].str());
    begin = i;
  }
  return out;
}

}  // namespace tandem::train
