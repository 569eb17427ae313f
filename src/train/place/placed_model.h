// --place 'PREFIX=DEVICE,...': a static placement of a model's modules on devices. The model is
// a Sequential whose forward is the chain of its top-level children, named by their state_dict
// names ("0", "1", ... for fmnist-cnn; "conv1", "layer1", ..., "fc" for the ResNets). A listed
// prefix names a module of the chain (or a tensor of it: "9.weight" names "9"); that module and
// the ones after it, up to the next listed one, go to the listed device; modules before the
// first listed one stay on the run's --device. A prefix inside a nested Sequential
// ("layer4.1" of a ResNet) cuts it: its children join the chain (place_chain). A prefix inside
// another container (a residual block "layer4.1.conv1": body and shortcut, no chain) is an error.
// PlacedModel runs the children in order on their devices. At each boundary the activation
// (forward) or its gradient (backward) is copied asynchronously on a copy stream of the
// receiving side: the copy stream waits (device-side) for an event recorded after the
// producer's ops, and the consumer's compute stream waits for the copy's event, so the host
// does not wait; only a cpu consumer, whose ops run on the calling thread, waits on the host.
// Parameters, gradients and the optimizer state live on their child's device (each update
// runs where its parameter lives). State and parameter names are the plain model's.
// Thread-safety: as Module (one thread).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tandem/device.h"
#include "tandem/nn/module.h"
#include "tandem/nn/sequential.h"
#include "tandem/stream.h"
#include "train/place/boundary_copy.h"

namespace tandem::train {

/// The PREFIX=DEVICE entries of --place `text`, as (prefix, device text), in order. Throws
/// Error(invalid_argument, "[train] --place ...") for an entry without '=' or an empty text.
std::vector<std::pair<std::string, std::string>> place_entries(const std::string& text);
/// The device text of an entry of --place `text`, parsed. Throws Error(invalid_argument,
/// "[train] --place TEXT: [device] ...") when it does not parse (nothing is configured here).
DeviceSpec place_device(const std::string& text, const std::string& device);

/// `model` with each nested Sequential that a prefix of --place `text` lies inside replaced by
/// its children (named "layer4.0", ... as in the state_dict; the same forward and backward),
/// recursively; `model` itself when no prefix goes inside one. Throws
/// Error(invalid_argument, "[train] --place ...") for a prefix inside a module that is not a
/// Sequential and has children (a residual block) and for malformed entries.
std::shared_ptr<nn::Sequential> place_chain(const std::string& text, const std::shared_ptr<nn::Sequential>& model);

/// The device of each top-level child of `model` for --place `text` (e.g. "9=virt:1",
/// "0=virt:0,9=cpu"); unlisted leading children get `first`. Throws
/// Error(invalid_argument, "[train] --place ...") for an entry without '=', a prefix that names
/// no child (listing the children's names), a child listed twice, prefixes out of the model's
/// order, or an unparsable device; the devices are not prepared here (configure_device).
std::vector<DeviceSpec> parse_place(const std::string& text, const nn::Sequential& model, Device first);

class PlacedModel final : public nn::Module {
 public:
  /// Moves child i of `model` to devices[i] (Module::to; blocks until the copies ran).
  PlacedModel(std::shared_ptr<nn::Sequential> model, std::vector<Device> devices);
  /// Waits for the work queued on the model's devices and copy streams.
  ~PlacedModel() override;
  /// x on any device; returns the last child's output on its device.
  Tensor forward(const Tensor& x) override;
  /// dy on the last child's device; the result (when needed) is on the first child's.
  Tensor backward(const Tensor& dy) override;
  void collect_parameters(const std::string& prefix, std::vector<nn::Parameter*>& out) override;
  void collect_state(const std::string& prefix, std::vector<nn::NamedTensor>& out) override;
  void reset_parameters(uint64_t seed, uint64_t& index) override;
  void train(bool on = true) override;
  void set_needs_input_grad(bool on) override;
  std::string describe() const override;
  /// The ops of the placed chain (it lists no children).
  std::vector<ops::Op> own_ops() const override { return model_->ops_used(); }
  /// The device the output (and so the loss) lives on.
  Device output_device() const { return devices_.back(); }
  /// "0..8 on virt:0, 9..11 on virt:1" (the chain's names).
  std::string describe_placement() const;

 private:
  std::shared_ptr<nn::Sequential> model_;
  std::vector<Device> devices_;
  std::vector<MemoryFormat> out_format_;  // each layer's forward output layout, for its gradient
  BoundaryCopier copier_;  // the boundaries' copies; destroyed (waiting for them) first
  size_t first_trainable_ = 0;
};

}  // namespace tandem::train
