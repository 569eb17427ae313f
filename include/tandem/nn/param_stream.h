// The seam between a model and parameters whose home is away from the device (--param-device
// cpu, train/place/param_stream.h): the model calls use(part, pass) before a part of it
// computes in `pass` and done(part, pass) after, and the callee makes the part's parameters
// (value, compute copy, grad in training) and buffers device tensors for the duration, ordered
// before the part's work on the device's current stream.
// Parts: kOuterPart, in use from the start of a forward to the end of its backward (an
// evaluation: to the end of its forward), and the blocks 0 .. n - 1 in forward order. A
// training step calls, in order: use(kOuterPart, forward); for each block i use(i, forward),
// done(i, forward); in backward, for i from n - 1 down, use(i, backward), done(i, backward);
// then done(kOuterPart, backward) once every gradient is final. An evaluation forward calls
// the same with StreamPass::eval and ends with done(kOuterPart, eval).
// Models: any that declares its blocks (Module::blocks) and installs a stream
// (Module::set_param_stream); nn::Gpt (the transformer blocks) and nn::Sequential (its stages'
// blocks, a ResNet's residual blocks) call it from their one BlockLoop (nn/block_loop.h).
// Thread-safety: called by the thread that runs the model.
#pragma once

namespace tandem::nn {

/// The passes a part of a model computes in: an evaluation forward, a training forward, a
/// backward (with recompute, the block's forward again first).
enum class StreamPass { eval, forward, backward };

/// The part in use for the whole step (embeddings, a stem and head).
inline constexpr int kOuterPart = -1;

class ParamStream {
 public:
  virtual ~ParamStream() = default;
  virtual void use(int part, StreamPass pass) = 0;
  virtual void done(int part, StreamPass pass) = 0;
};

}  // namespace tandem::nn
