#include "train/place/placed_model.h"

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/profile/profiler.h"

namespace tandem::train {

std::vector<DeviceSpec> parse_place(const std::string& text, const nn::Sequential& model, Device first) {
  std::vector<DeviceSpec> out(model.size(), DeviceSpec{first, {}});
  const std::string names = fmt::format("0..{}", model.size() - 1);
  size_t next_child = 0, pos = 0;
  bool any = false;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string entry = text.substr(pos, comma - pos);
    pos = comma + 1;
    const size_t eq = entry.find('=');
    TD_CHECK_ARG(eq != std::string::npos && eq > 0, "train",
                 "--place {}: expected PREFIX=DEVICE entries separated by commas (e.g. 9=cpu), got '{}'", text, entry);
    const std::string prefix = entry.substr(0, eq), child = prefix.substr(0, prefix.find('.'));
    size_t index = model.size();
    for (size_t i = 0; i < model.size(); ++i)
      if (child == std::to_string(i)) index = i;
    TD_CHECK_ARG(index < model.size(), "train",
                 "--place {}: unknown module prefix '{}'; expected one of the model's modules {} (their state_dict "
                 "names)",
                 text, prefix, names);
    TD_CHECK_ARG(index >= next_child, "train",
                 "--place {}: module {} is listed out of order or twice; expected prefixes in the model's order", text,
                 prefix);
    DeviceSpec spec;
    try {
      spec = DeviceSpec::parse(entry.substr(eq + 1));
    } catch (const Error& e) {
      throw_error(ErrorCode::invalid_argument, "train", fmt::format("--place {}: {}", text, e.what()));
    }
    for (size_t i = index; i < model.size(); ++i) out[i] = spec;
    next_child = index + 1;
    any = true;
  }
  TD_CHECK_ARG(any, "train", "--place: expected PREFIX=DEVICE entries");
  return out;
}

PlacedModel::PlacedModel(std::shared_ptr<nn::Sequential> model, std::vector<Device> devices)
    : model_(std::move(model)), devices_(std::move(devices)) {
  TD_CHECK_ARG(devices_.size() == model_->size() && !devices_.empty(), "place",
               "expected a device per module ({}), got {}", model_->size(), devices_.size());
  bool found = false;
  for (size_t i = 0; i < model_->size(); ++i) {
    if (!devices_[i].is_host()) (*model_)[i]->to(devices_[i]);
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
  for (auto& [d, s] : copy_streams_) {
    try {
      s.synchronize();
    } catch (...) {
    }
  }
}

Stream PlacedModel::copy_stream(Device side) {
  for (const auto& [d, s] : copy_streams_)
    if (d == side) return s;
  Stream s = runtime_for(side).new_stream(side.index);
  s.set_label("place boundary copies");
  copy_streams_.emplace_back(side, s);
  return s;
}

// Copies `t` to `to` on the receiving side's copy stream (the sending side's when receiving on
// the cpu), after the producer's queued ops; the consumer waits for it on the device.
Tensor PlacedModel::cross(const Tensor& t, Device to) {
  const Device from = t.device();
  if (from == to) return t;
  profile::ScopedSpan span(profile::Stage::h2d, "boundary copy");
  const Device side = to.is_host() ? from : to;
  Stream copy = copy_stream(side);
  if (!from.is_host()) copy.wait(runtime_for(from).current_stream(from.index).record());
  Tensor out = t.to(to, copy);
  const Event done = copy.record();
  if (to.is_host()) {
    done.synchronize();  // the cpu's ops run on this thread
  } else {
    runtime_for(to).current_stream(to.index).wait(done);
  }
  return out;
}

Tensor PlacedModel::forward(const Tensor& x) {
  Tensor h = x;
  for (size_t i = 0; i < model_->size(); ++i) {
    if (model_->fused_away(i)) continue;
    h = (*model_)[i]->forward(cross(h, devices_[i]));
  }
  return h;
}

Tensor PlacedModel::backward(const Tensor& dy) {
  Tensor g = dy;
  for (size_t i = model_->size(); i-- > 0;) {
    if (model_->fused_away(i)) continue;
    g = (*model_)[i]->backward(cross(g, devices_[i]));
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
    out += fmt::format("{}{}..{} on {}", out.empty() ? "" : ", ", begin, i - 1, devices_[begin].str());
    begin = i;
  }
  return out;
}

}  // namespace tandem::train
