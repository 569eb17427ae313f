// StreamLayout: how a model's parameters divide into the parts ParamStreamer streams
// (train/place/param_stream.h), and how the streamer is installed on the model
// (tandem/nn/param_stream.h), read from the blocks the model declares (Module::blocks):
// each declared block is a part, in forward order ("transformer.h.<i>" of a GPT, a ResNet's
// residual blocks "layer<s>.<b>"); the layers outside them (a GPT's embeddings, ln_f and the
// tied lm_head; a ResNet's stem and head) are the outer part. BatchNorm's running statistics
// ([C] f32 buffers) move with their part; num_batches_tracked (a 0-d counter) stays on the host.
// Thread-safety: build it on the thread that owns the model, before training.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tandem/nn/module.h"
#include "tandem/nn/param_init.h"
#include "tandem/nn/param_stream.h"
#include "tandem/tensor.h"

namespace tandem::train {

struct StreamLayout {
  std::vector<nn::Parameter*> outer;
  std::vector<std::vector<nn::Parameter*>> blocks;  // in forward order
  std::vector<Tensor*> outer_buffers;                // module buffers the part's ops read and write
  std::vector<std::vector<Tensor*>> block_buffers;   // per block
  std::function<void(nn::ParamStream*)> install;     // on the model (nullptr: removed)
  /// The layers of the outer part in short (ModelBlocks::outer_label): "embedding, ln_f and
  /// lm_head" for a GPT, "stem, classifier" for a ResNet.
  std::string outer_label;
  /// The disk tier (ParamStreamer::set_disk_tier follows): the streamer keeps the model's
  /// values as they are instead of pinned copies, which set_disk_tier moves to disk.
  bool values_to_disk = false;
  /// A model built without memory (nn::make_model_lazy): where the parameters' f32 values come
  /// from (nn::recorded_init_source, or train::init_file_source for --init); the streamer
  /// writes each home from it, part by part (--zero 3: only this rank's element ranges), so the
  /// whole model never exists on the host. Empty: the parameters hold their values.
  nn::ValueSource source;
};

/// The layout of `model` (which must outlive it), from its declared blocks. Throws
/// Error(invalid_argument) naming `model_name` for a model that declares none (the streamed
/// models are listed).
StreamLayout stream_layout(nn::Module& model, const std::string& model_name);

/// Whether stream_layout takes `model` (it declares blocks: a GPT or a ResNet).
bool streamable(nn::Module& model);

/// The part (-1: the outer part, else the block index in forward order) of each parameter of
/// `model`, by name: what the memory plan counts per part. The same division as stream_layout.
/// Throws as stream_layout.
std::vector<int> stream_parts(nn::Module& model, const std::string& model_name);

/// --optimizer-split RATIO: how many parts, taken in the order their gradients become final
/// last (the outer part, then blocks 0, 1, ...), stay on the device and are updated there, so
/// that the host updates at least `host_share` of the parameters (`elements`: the outer part's
/// count, then each block's). 0 for a share of 1. Throws Error(invalid_argument) for a share
/// outside (0, 1], or when even the outer part alone would leave the host less than it
/// (naming the smallest split there is).
int device_parts_for_split(const std::vector<int64_t>& elements, double host_share);
/// The elements of each part of `layout`: the outer part's, then each block's (what
/// device_parts_for_split takes).
std::vector<int64_t> part_elements(const StreamLayout& layout);

}  // namespace tandem::train
