#include "train/place/offload_activations.h"

#include <memory>

#include "tandem/error.h"
#include "train/place/activation_offload.h"

namespace tandem::train {

void offload_activations(Run& r, const TrainConfig& cfg) {
  TD_CHECK_ARG(!r.model->blocks().blocks.empty() && cfg.place.empty() && cfg.devices.empty(),
               "train",
               "--activations-device cpu: expected a GPT or a ResNet (--model {}) on one --device, "
               "without --place "
               "or --devices",
               cfg.model);
  auto offloader = std::make_shared<ActivationOffloader>(r.device);
  r.model->set_activation_offload([offloader](const Tensor& x) { return offloader->to_host(x); },
                                  [offloader](const Tensor& x) { return offloader->to_device(x); });
  r.activations = offloader;
}

}  // namespace tandem::train
