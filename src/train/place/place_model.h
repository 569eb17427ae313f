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
/// r.model and r.device for a chain. Throws Error(invalid_argument, "[train] --place ...")
/// with --devices, `distributed`, --optimizer-device cpu, for a model that is no chain and
/// places no blocks, and for entries the parsers refuse; a device's errors name the flag.
void place_model(Run& r, const TrainConfig& cfg, bool distributed);

}  // namespace tandem::train
