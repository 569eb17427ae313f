// --place by blocks, for a model that runs its declared blocks on devices of their own
// (nn::ModelBlocks::places_blocks: a GPT): 'transformer.h.K=DEVICE,...' puts block K and the
// blocks after it, up to the next listed one, on DEVICE; the blocks before the first listed
// one and the layers outside the blocks (a GPT's embedding, ln_f and tied lm_head) stay on
// the run's --device, where the batches, the fused loss and the metrics live. The activations
// cross to a block's device before it and back after the last block; their gradients cross
// the same boundaries in reverse (BoundaryCopier: on copy streams, no host wait unless the
// receiver is the cpu). Parameters, gradients and optimizer state live on their block's
// device. The result equals the one-device run's up to each device's kernels (the same ops on
// virt and cpu: bit for bit).
// Thread-safety: call at start-up, before the model runs.
#pragma once

#include <string>
#include <vector>

#include "tandem/device.h"
#include "tandem/nn/module.h"

namespace tandem::train {

/// The device of each block of `blocks` (a model's declaration) for --place `text` (e.g.
/// "transformer.h.3=virt:1"); blocks before the first listed one get `home`. Throws
/// Error(invalid_argument, "[train] --place ...") for an entry that names no block (listing
/// the first..last block; "transformer.h.01" and names inside a block, such as
/// "transformer.h.1.attn", included), blocks out of order or twice, or a device that does not
/// parse; the devices are not prepared here (configure_device).
std::vector<DeviceSpec> parse_block_place(const std::string& text, const nn::ModelBlocks& blocks,
                                          Device home);

/// Moves `model` to `home` and its declared block i to devices[i] (prepared devices), and has
/// it cross between them (Module::set_block_devices with a BoundaryCopier). Returns a
/// description: "transformer.h.0..transformer.h.2 on cpu, transformer.h.3 on virt:0
/// (embedding, ln_f and lm_head on cpu)". Throws Error(invalid_argument) for a count other
/// than the blocks' or a model that does not place its blocks.
std::string place_blocks(nn::Module& model, const std::vector<Device>& devices, Device home);

}  // namespace tandem::train
