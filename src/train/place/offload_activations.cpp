#include "train/place/offload_activations.h"

#include <memory>

#include "tandem/error.h"
#include "train/place/activation_offload.h"

namespace tandem::train {

void offload_activations(Run& r, const TrainConfig& cfg) {
  TD_CHECK_ARG(!r.model->blocks().blocks.empty(), "train",
               "--activations-device cpu: expected a GPT or a ResNet (--model {}), whose blocks keep the inputs "
               "that move",
               cfg.model);
  const bool one_device = cfg.place.empty() && cfg.devices.empty();
  auto offloads = std::make_shared<ActivationOffloads>(r.device, one_device);
  if (one_device) {  // the model's own offload (Module::set_activation_offload), as before --place and --devices
    r.model->set_activation_offload([offloads](const Tensor& x) { return offloads->to_host(x); },
                                    [offloads](const Tensor& x) { return offloads->to_device(x); });
  } else {
    ActivationOffloads::install(offloads, *r.model);
  }
  r.activations = offloads;
}

}  // namespace tandem::train
