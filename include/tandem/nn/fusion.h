// Graph passes over a module graph (Module::named_children).
// fuse_batch_norm_relu: in every Sequential at any depth, a BatchNorm2d directly followed by a
// ReLU becomes one BatchNorm2d that applies max(0, .) in its own pass (forward and backward),
// and the ReLU is skipped (Sequential::fused_away). Results are the same as unfused, to
// rounding. With on = false the pass undoes the fusion everywhere.
// Thread-safety: call while nobody else uses the graph.
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

/// Applies (on) or removes (off) BatchNorm2d+ReLU fusion below and at `root`; returns the
/// number of pairs fused (on) or unfused (off).
int fuse_batch_norm_relu(Module& root, bool on = true);

}  // namespace tandem::nn
