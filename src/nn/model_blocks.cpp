// The block declaration's defaults and the kept-input offload every model with blocks shares
// (Module::blocks, Module::set_activation_offload; tandem/nn/module.h).
#include <memory>
#include <utility>

#include "tandem/error.h"
#include "tandem/nn/kept_inputs.h"
#include "tandem/nn/module.h"

namespace tandem::nn {
namespace {

std::string first_line(const Module& m) {
  const std::string d = m.describe();
  return d.substr(0, d.find('\n'));
}

}  // namespace

void Module::set_kept_inputs(std::shared_ptr<KeptInputs> store) {
  TD_CHECK_ARG(store == nullptr, "Module", "{} keeps no input for recompute", first_line(*this));
}

void Module::set_param_stream(ParamStream* stream) {
  TD_CHECK_ARG(stream == nullptr, "Module", "{} declares no blocks to stream", first_line(*this));
}

void Module::set_block_devices(std::vector<Device> devices, CrossFn) {
  TD_CHECK_ARG(devices.empty(), "Module", "{} does not run its blocks on devices of their own",
               first_line(*this));
}

void Module::set_activation_offload(MoveFn to_host, MoveFn to_device) {
  const bool on = static_cast<bool>(to_host);
  TD_CHECK_ARG(on == static_cast<bool>(to_device), "Module",
               "expected both copy functions or neither");
  const ModelBlocks d = blocks();
  TD_CHECK_ARG(!on || !d.blocks.empty(), "Module", "{} declares no blocks whose inputs could move",
               first_line(*this));
  for (const NamedChild& b : d.blocks)
    TD_CHECK_ARG(
        !on || b.module->recompute(), "Module",
        "kept block inputs move only with recompute (set_recompute(true)); {} does not recompute",
        b.name);
  TD_CHECK_ARG(!on || d.block_devices.empty(), "Module",
               "kept block inputs move only on one device (no block devices)");
  const auto store =
      on ? std::make_shared<KeptInputs>(std::move(to_host), std::move(to_device)) : nullptr;
  for (const NamedChild& b : d.blocks) b.module->set_kept_inputs(store);
}

}  // namespace tandem::nn
