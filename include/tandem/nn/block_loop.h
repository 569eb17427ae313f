// BlockLoop: the one loop over a model's declared blocks (Module::blocks; llm.c's layer loop),
// which nn::Gpt and nn::Sequential (a ResNet's residual blocks) both run. Per block, in forward
// order and in backward in reverse, it does what is written once here:
//  - the crossing to the block's device (Module::set_block_devices): the activation (forward)
//    or its gradient (backward) is copied with `cross` before a block on another device than
//    the one it is on, and back to the device it came from after the loop;
//  - the streaming use/done around the block's compute (Module::set_param_stream,
//    tandem/nn/param_stream.h): part i is block i; begin() and end() call the outer part's.
// Recompute and the kept-input offload are the blocks' own, written once in
// nn::RecomputingBlock (tandem/nn/recomputing_block.h; Module::set_recompute,
// Module::set_kept_inputs, one KeptInputs store for the declared blocks) so that a block
// recomputes the same inside this loop or alone; the loop only runs the blocks in order, which
// is what the store relies on (backwards in the reverse order of the forwards).
// Shapes: whatever the blocks take and give ([B, T, C] for a GPT, [N, C, H, W] for a ResNet).
// Thread-safety: one thread at a time (the model's, see Module).
#pragma once

#include <functional>
#include <vector>

#include "tandem/device.h"
#include "tandem/nn/module.h"
#include "tandem/nn/param_stream.h"
#include "tandem/tensor.h"

namespace tandem::nn {

class BlockLoop {
 public:
  /// Installs `stream` (not owned; null removes it). Throws Error(invalid_argument) with
  /// block devices (parameters stream to one device only).
  void set_stream(ParamStream* stream);
  ParamStream* stream() const { return stream_; }
  /// Block i of `blocks` blocks runs on devices[i] (empty: where its input is). Throws
  /// Error(invalid_argument) for a count other than `blocks`, an empty `cross` with devices,
  /// or with a stream installed.
  void set_devices(std::vector<Device> devices, Module::CrossFn cross, size_t blocks);
  const std::vector<Device>& devices() const { return devices_; }

  /// The start of a pass over the model: use(kOuterPart, pass) when streaming.
  void begin(StreamPass pass);
  /// The end of a pass over the model (an evaluation's forward, a backward): done(kOuterPart,
  /// pass) when streaming.
  void end(StreamPass pass);
  /// Runs blocks[0], blocks[1], ... on `x` (`pass`: forward in training, eval otherwise);
  /// returns the last block's output on x's device.
  Tensor forward(const std::vector<Module*>& blocks, Tensor x, StreamPass pass);
  /// Runs the blocks' backwards from the last to the first on `g` (the last block's output
  /// gradient); `after(i)`, when given, runs after block i's backward. Stops early, returning
  /// an undefined Tensor, when a block gives none (it computes no input gradient: the blocks
  /// before it have no parameters). Returns the first block's input gradient on g's device.
  Tensor backward(const std::vector<Module*>& blocks, Tensor g,
                  const std::function<void(size_t)>& after = {});

 private:
  ParamStream* stream_ = nullptr;
  std::vector<Device> devices_;
  Module::CrossFn cross_;
};

}  // namespace tandem::nn
