// --place for a run (train/run_builder.h): a model that runs its declared blocks on devices
// of their own (a GPT, train/place/placed_blocks.h) is placed by blocks and keeps the run's
// device; any other chain of modules (a Sequential: fmnist-cnn, mlp, the ResNets) becomes a
// PlacedModel (train/place/placed_model.h) and the run's device becomes the output's (the
// loss, the metrics and the feeds' batches live there; the first module's input is copied over).
// Thread-safety: call at start-up, on the thread that builds the run.
#pragma once

#include "tandem/train/config.h"
#include "train/run_builder.h"

namespace tandem::train {

/// Places r.model by cfg.place and sets r.placement (the description for the banner), and
/// r.model and r.device for a chain. Each rank of a distributed run (`distributed`) places its
/// own replica the same way. Throws Error(invalid_argument, "[train] --place ...") with
/// --devices, --optimizer-device cpu, --zero 1 or 3 when `distributed`, for a model that is no
/// chain and places no blocks, and for entries the parsers refuse; a device's errors name the
/// flag.
void place_model(Run& r, const TrainConfig& cfg, bool distributed);

/// Data parallel over placed replicas: broadcasts rank 0's parameters and buffers of `model`
/// (placed) to the other ranks, each tensor with the communicator of its device
/// (comm::for_device of `comm`, the host's), one at a time in state-dict order (the host waits
/// for each). Errors: the communicators'.
void broadcast_placed_model(const comm::CommunicatorPtr& comm, nn::Module& model);

}  // namespace tandem::train
