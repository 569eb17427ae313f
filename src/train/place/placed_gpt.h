// --place for a GPT (nn::Gpt): 'transformer.h.K=DEVICE,...' puts block K and the blocks after
// it, up to the next listed one, on DEVICE; the blocks before the first listed one, the
// embedding (transformer.wte, transformer.wpe), transformer.ln_f and the tied lm_head stay on
// the run's --device, where the batches, the fused loss and the metrics live. The hidden
// states [B, T, C] cross to a block's device before it and back before ln_f; their gradients
// cross the same boundaries in reverse (BoundaryCopier: on copy streams, no host wait unless
// the receiver is the cpu). Parameters, gradients and optimizer state live on their block's
// device. The result equals the one-device run's up to each device's kernels (the same ops on
// virt and cpu: bit for bit).
// Thread-safety: call at start-up, before the model runs.
#pragma once

#include <string>
#include <vector>

#include "tandem/device.h"
#include "tandem/nn/gpt.h"

namespace tandem::train {

/// The device of each block of `gpt` for --place `text` (e.g. "transformer.h.3=virt:1");
/// blocks before the first listed one get `home`. Throws Error(invalid_argument,
/// "[train] --place ...") for an entry that names no block (listing
/// transformer.h.0..transformer.h.{L-1}; "transformer.h.01" and names inside a block, such as
/// "transformer.h.1.attn", included), blocks out of order or twice, or a device that does not
/// parse; the devices are not prepared here (configure_device).
std::vector<DeviceSpec> parse_gpt_place(const std::string& text, const nn::Gpt& gpt, Device home);

/// Moves `gpt` to `home` and block i to devices[i] (prepared devices), and has it cross
/// between them (Gpt::set_block_devices with a BoundaryCopier). Returns a description:
/// "transformer.h.0..transformer.h.2 on cpu, transformer.h.3 on virt:0 (embedding, ln_f and
/// lm_head on cpu)". Throws Error(invalid_argument) for a count other than the blocks'.
std::string place_gpt(nn::Gpt& gpt, const std::vector<Device>& devices, Device home);

}  // namespace tandem::train
