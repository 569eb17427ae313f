// --activations-device cpu for a run (train/run_builder.h): the kept inputs of the model's
// declared blocks (a GPT's blocks, a ResNet's residual blocks) wait in host memory between
// forward and backward (Module::set_activation_offload with an ActivationOffloader,
// train/place/activation_offload.h). With --place or --devices each block's input moves with
// the offloader of the device it was computed on (ActivationOffloads).
// Thread-safety: call at start-up, on the thread that builds the run.
#pragma once

#include "tandem/train/config.h"
#include "train/run_builder.h"

namespace tandem::train {

/// Installs the offload on r.model and keeps the offloaders in r.activations (they live as long
/// as the model's copy functions). Recompute was set and checked before (the config and the
/// plan, or build_run). With --place call it before the model is placed (a placed chain
/// declares no blocks); with --devices each replica is installed too
/// (ActivationOffloads::install). Throws Error(invalid_argument, "[train]
/// --activations-device cpu: ...") for a model without blocks, and for a cpu --device without
/// --place or --devices (ActivationOffloader).
void offload_activations(Run& r, const TrainConfig& cfg);

}  // namespace tandem::train
