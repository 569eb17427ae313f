// Module: a layer or a container of modules, with an explicit forward and backward (no tape). forward() caches what
// backward() needs when the module is in training mode; backward() returns the gradient
// with respect to the input and ACCUMULATES gradients into its parameters' .grad tensors
// (call zero_grad() between steps). Shapes are documented per module.
// Parameter and buffer names follow PyTorch's state_dict naming for the equivalent module,
// so a Sequential's state round-trips with torch.nn.Sequential ("0.weight", "1.running_mean").
// Modules form a graph: a container lists its children (named_children()), and the base class
// recurses through them for parameters, state, reset, train/eval, to() and the grad-ready
// hook, however deeply containers nest; a leaf overrides collect_parameters/collect_state.
// Thread-safety: a module is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tandem/device.h"
#include "tandem/nn/buffer_plan.h"
#include "tandem/nn/param_stream.h"
#include "tandem/op_support.h"
#include "tandem/tensor.h"

namespace tandem::nn {

/// A trainable tensor and its gradient (same shape, f32, same device).
/// Mixed precision: `value` stays the f32 master weight the optimizer updates; `compute` is
/// its low-precision copy (bf16 or f16, same shape and device) that the forward and the input
/// gradient read, rewritten by the optimizer after each update (rounded to nearest even).
struct Parameter {
  std::string name;  // full dotted name once collected through a container, e.g. "4.weight"
  Tensor value;
  Tensor grad;
  bool requires_grad = true;
  /// Apply weight decay to this parameter (false e.g. for biases when the user asks).
  bool decay = true;
  /// Undefined in fp32 and for parameters that stay f32 (biases, batch-norm parameters).
  Tensor compute = Tensor();
  /// Whether Module::set_compute_dtype gives it a low-precision copy: set by layers whose op
  /// reads the parameter as a data tensor (convolution and linear weights).
  bool low_precision = false;
  /// The tensor an op with data dtype `dtype` reads: `compute` when it has that dtype, else
  /// `value` (an f32 op on a mixed-precision model reads the master weights).
  const Tensor& as(DType dtype) const {
    return compute.defined() && compute.dtype() == dtype ? compute : value;
  }
};

/// A named tensor of module state, parameter or buffer (running statistics, counters).
struct NamedTensor {
  std::string name;
  Tensor tensor;
  bool is_parameter = false;
};

/// Called during backward() with parameters whose gradients are final for this backward pass
/// (every op that accumulates into them has been enqueued). See Module::set_grad_ready_hook.
using GradReadyHook = std::function<void(const std::vector<Parameter*>& params)>;

class Module;
class KeptInputs;

/// A child of a container: its name in state-dict names ("0", "conv1", "layer1") and the
/// module. An empty name puts the child's names directly under the container's prefix (a
/// residual block's body: "conv1.weight", not "body.conv1.weight").
struct NamedChild {
  std::string name;
  Module* module = nullptr;
};

/// A model's declaration of its blocks (Module::blocks), llm.c's per-layer loop made explicit:
/// the repeated units it runs one after the other in forward order, and the layers outside
/// them. Streaming (--param-device cpu), kept-input offload (--activations-device cpu) and
/// block placement (--place) read it instead of asking what the model is. Names are
/// state-dict prefixes without the trailing dot: "transformer.h.3" (a GPT), "layer2.1" (a
/// ResNet); every parameter whose name starts with a block's prefix and a dot belongs to that
/// block, every other one to the outer part. Pointers into the model, which stays the owner.
struct ModelBlocks {
  /// The layers outside the blocks, in state-dict order with their prefixes: a GPT's
  /// {"transformer", embedding (wte, wpe)}, {"transformer.ln_f", ln_f}; a ResNet's stem
  /// (conv1, bn1, ...) and head (avgpool, flatten, fc).
  std::vector<NamedChild> outer;
  /// The blocks in forward order (a GPT's transformer.h.0 .. h.{L-1}; a ResNet's residual
  /// blocks layer1.0 .. layer4.{n-1}).
  std::vector<NamedChild> blocks;
  /// What the model is called in messages: "GPT", "ResNet".
  std::string kind;
  /// The outer layers in short, for descriptions: "embedding, ln_f and lm_head", "stem, classifier".
  std::string outer_label;
  /// The outer layers in a sentence, for messages: "the embedding, ln_f and the tied lm_head".
  std::string outer_phrase;
  /// Whether the model runs its blocks on devices of their own (set_block_devices; --place
  /// by blocks); otherwise a placement cuts the model's chain of modules.
  bool places_blocks = false;
  /// The devices set_block_devices gave, one per block (empty: the blocks run where the
  /// outer layers do).
  std::vector<Device> block_devices;
};

class Module {
 public:
  virtual ~Module() = default;

  /// This module's direct children in state-dict order; empty for a leaf (the default).
  virtual std::vector<NamedChild> named_children() { return {}; }
  /// named_children() without the names.
  std::vector<Module*> children();
  /// The prefix of `child`'s names under `prefix` ("" name: `prefix` itself).
  static std::string child_prefix(const std::string& prefix, const NamedChild& child);

  /// Forward pass; see each module for shapes.
  virtual Tensor forward(const Tensor& x) = 0;
  /// Backward pass for the last forward() in training mode; dy has forward's output shape.
  /// Returns dx with the input's shape. Throws Error(invalid_argument) if called without a
  /// preceding training-mode forward.
  virtual Tensor backward(const Tensor& dy) = 0;

  /// The memory plan's view of one training step (nn/buffer_plan.h): adds to `plan` the
  /// activation buffers forward() and backward() would allocate and keep for an input of
  /// `input`'s shape whose activations are in `dtype` (the compute dtype: f32, bf16 or f16;
  /// token ids for a language model), and returns the output's shape. Allocates nothing and
  /// runs no op. Follows needs_input_grad() and set_recompute(). The default throws
  /// Error(not_available, "[plan] <module> has no buffer estimate"); every built-in module
  /// overrides it.
  virtual Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan);

  /// Drops the activation buffers this module and those below it keep (outputs, saved
  /// statistics, input gradients) and any forward state, so that their memory goes back to
  /// the allocator once no caller holds them; the next forward() allocates them again. A
  /// backward() after it without a new forward() throws as without a forward. The default
  /// recurses into the children; leaves that keep buffers override it.
  virtual void release_buffers();

  /// Activation recompute (checkpointing; Chen et al. 2016, arXiv 1604.06174): a module that
  /// supports it (a nn::RecomputingBlock, where it is written once: nn::Block, a GPT-2 block,
  /// and nn::Residual, a ResNet's residual block) keeps only its input between a training-mode
  /// forward() and its backward(), releases its internals after the forward, and in
  /// backward() first runs its forward again from the kept input, then the backward; results
  /// and gradients are bit-identical to not recomputing (the same kernels on the same
  /// inputs; a block with dropout would replay its mask from the same Philox counter). The
  /// default passes `on` to the children. Returns how many modules of the graph now
  /// recompute (0: none supports it).
  virtual int64_t set_recompute(bool on);

  /// The model's blocks (ModelBlocks above). A model without blocks declares none (the
  /// default: empty). Cheap; call it again after the model changed (set_block_devices).
  virtual ModelBlocks blocks() { return {}; }
  /// Whether this module recomputes (set_recompute) itself: true for a block with recompute
  /// on. The default is false.
  virtual bool recompute() const { return false; }
  /// With recompute: where this block keeps its input between a training forward and its
  /// backward (nn/kept_inputs.h; shared by the blocks of a model, in forward order), instead
  /// of holding it itself; null: held here again. A block that supports it (a
  /// nn::RecomputingBlock: nn::Block, nn::Residual) overrides it; the default throws
  /// Error(invalid_argument) for a store.
  virtual void set_kept_inputs(std::shared_ptr<KeptInputs> store);
  /// Kept block inputs away from the device (--activations-device cpu): gives every declared
  /// block one KeptInputs store moving with `to_host` and `to_device` (asynchronous copies
  /// ordered by the caller's streams and events; both return at once). After each block's
  /// training forward its input waits on the host; before a block's backward its input comes
  /// back, and the one of the block before it starts coming back (one block ahead, so the copy
  /// overlaps the backward). Bit-exact copies: training gives the weights of inputs kept on
  /// the device. Both functions empty: the inputs stay with their blocks again. Throws
  /// Error(invalid_argument) for one function without the other, for a model without
  /// blocks, without recompute on every block, or with blocks on devices of their own.
  using MoveFn = std::function<Tensor(const Tensor&)>;
  void set_activation_offload(MoveFn to_host, MoveFn to_device);
  /// Parameters streamed from their home (tandem/nn/param_stream.h): the model calls
  /// stream->use(part, pass) and done(part, pass) around its outer layers (kOuterPart) and
  /// each declared block (part = the block's index), in the order param_stream.h gives; null
  /// removes it. Not owned. The default throws Error(invalid_argument) for a stream (the
  /// module has no blocks to stream).
  virtual void set_param_stream(ParamStream* stream);
  /// Copies a tensor to a device: `cross(t, d)` is t on d (t itself when it is there).
  using CrossFn = std::function<Tensor(const Tensor&, Device)>;
  /// Blocks on several devices (--place by blocks, when blocks().places_blocks): block i
  /// runs on devices[i] (one per declared block) and must already be there; the outer layers
  /// stay where they are. Activations cross (through `cross`) before each block on another
  /// device than its input and back after the last block; their gradients cross the same
  /// boundaries in reverse. Empty `devices`: one device. The default throws
  /// Error(invalid_argument) (the model does not place its blocks).
  virtual void set_block_devices(std::vector<Device> devices, CrossFn cross);

  /// Appends pointers to this module's parameters (names prefixed with `prefix`, each
  /// Parameter::name set to its full name). The default recurses into the children.
  virtual void collect_parameters(const std::string& prefix, std::vector<Parameter*>& out);
  /// Appends this module's state (parameters and buffers) in PyTorch state_dict order. The
  /// default recurses into the children.
  virtual void collect_state(const std::string& prefix, std::vector<NamedTensor>& out);

  /// Re-initialises this module's parameters (PyTorch's default init for the layer), drawing
  /// parameter number `index` (counted over the whole model in collect_parameters order)
  /// from tandem::Philox(seed, index); `index` advances past this module's parameters.
  /// The default recurses into the children in order. Deterministic per seed.
  virtual void reset_parameters(uint64_t seed, uint64_t& index);

  /// Switches training mode (BatchNorm statistics, Dropout); recurses into the children.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// Whether backward() must compute the gradient w.r.t. the input (default true). When
  /// false, backward() may skip it and return an undefined Tensor (parameter gradients are
  /// still accumulated); use it for a model's first layer, whose input is data.
  /// Containers pass the setting to their first child.
  virtual void set_needs_input_grad(bool on) { needs_input_grad_ = on; }
  bool needs_input_grad() const { return needs_input_grad_; }

  /// Installs `hook` (an empty function removes it) on this module and every module below it.
  /// Containers call it during backward() after each leaf child's backward() with that
  /// child's parameters; a child that is itself a container reports its own children, so
  /// gradients are reported leaf by leaf however deeply containers nest, and a consumer (an
  /// offloaded optimizer, a gradient reducer) can start copying them while the rest of
  /// backward still runs. Leaf modules never call it: a consumer must treat parameters that
  /// were not reported as ready at the end of backward(). A parameter may be reported more
  /// than once. The hook runs on the thread that calls backward(); it must not call into
  /// this module.
  virtual void set_grad_ready_hook(GradReadyHook hook);

  /// Whether this model computes its loss itself (a language model's fused classifier and
  /// cross-entropy, nn/gpt.h): a training step then calls loss_forward and loss_backward
  /// instead of forward, a CrossEntropyLoss and backward. The default is false.
  virtual bool fuses_loss() const { return false; }
  /// The fused loss of a batch: `input` and `target` are the batch's fields (tokens [B, T] and
  /// the next tokens [B, T] for a language model); adds to metrics [4] f32 the loss sum, the
  /// correct predictions, the counted targets and the targets out of range, as
  /// CrossEntropyLoss::forward_accumulate does, counting each target element (B * T of them
  /// for a language model: the loss is per token). In training mode it keeps what
  /// loss_backward needs. `grad_scale` (optional): a loss scaler's state on the model's device
  /// (f32, element 0 the scale; optim::LossScaler::state), which multiplies the loss gradient
  /// before it is rounded to the compute dtype (fp16 training). The default throws
  /// Error(invalid_argument) (the module has no fused loss).
  virtual void loss_forward(const Tensor& input, const Tensor& target, const Tensor& metrics,
                            const Tensor& grad_scale = Tensor());
  /// The backward of the last training-mode loss_forward: accumulates the parameters'
  /// gradients of the mean loss. The default throws Error(invalid_argument).
  virtual void loss_backward();

  /// Short description, e.g. "Conv2d(1, 32, kernel_size=3, padding=1)".
  virtual std::string describe() const = 0;
  /// Tied state for export: pairs {alias, source} of state-dict names where the equivalent
  /// PyTorch module lists `source` a second time under `alias` (GPT2LMHeadModel's
  /// lm_head.weight, the same tensor as transformer.wte.weight). Files written for PyTorch
  /// carry a copy under the alias; --init accepts one equal to the source. Default: none.
  virtual std::vector<std::pair<std::string, std::string>> tied_state() const { return {}; }
  /// The equivalent PyTorch model's configuration as safetensors metadata (GPT-2:
  /// GPT2Config's vocab_size, n_positions, n_embd, n_layer, n_head), recorded by --save so
  /// that the file can be rebuilt without flags. Default: none.
  virtual std::vector<std::pair<std::string, std::string>> config_metadata() const { return {}; }

  /// The backend ops (tandem/op_support.h) this module calls itself in forward() and
  /// backward(), its children's not counted. A module that calls ops overrides it (the
  /// default: none); a test runs every model and checks that nothing else is called.
  virtual std::vector<ops::Op> own_ops() const { return {}; }
  /// The ops forward(), backward() and zero_grad() call, over the whole graph: own_ops() of
  /// this module and of every module below it, and zero_ when there are parameters. Each
  /// once, in first-seen order. The precision check asks the device about these only.
  std::vector<ops::Op> ops_used();

  // Convenience wrappers over collect_*.
  std::vector<Parameter*> parameters();
  std::vector<NamedTensor> state_dict();
  /// Sets every parameter's grad to zero (ops::zero_: enqueued on the device's current
  /// stream for virt and cuda parameters).
  void zero_grad();
  /// Moves every parameter value and grad and every buffer (running statistics) to `device`,
  /// in place: the Tensor handles keep their identity (Storage::migrate), so Parameter
  /// pointers held by an optimizer and tensors from an earlier state_dict() follow. 0-d i64
  /// counters (BatchNorm2d's num_batches_tracked) stay on the host: the host increments them
  /// and no kernel reads them. Working buffers that modules keep between forward and
  /// backward are allocated on the input's device at the next forward. Blocks the host until
  /// the copies ran. Throws Error(not_available) for a device this build or machine lacks and
  /// Error(out_of_memory) when the device cannot hold the model.
  void to(Device device);
  /// Mixed precision: gives every parameter with `low_precision` set a `compute` copy of its
  /// value in `dtype` (bf16 or f16; f32 removes the copies), or rewrites the copy from the
  /// value when it exists (call it after loading weights into the values). On the parameters'
  /// device; blocks the host until the copies ran. Activations then follow the input's dtype
  /// through every layer (BatchNorm2d statistics, the loss and softmax stay f32). Throws
  /// Error(invalid_argument) for another dtype.
  void set_compute_dtype(DType dtype);
  /// The device of the first parameter (cpu for a module without parameters).
  Device device();
  /// state_dict() with every tensor on the host: device tensors are copied back (the host
  /// waits for the copies); host tensors are the module's own (shared storage). For export
  /// (safetensors) after training on a device.
  std::vector<NamedTensor> host_state_dict();
  /// Total number of trainable parameter elements.
  int64_t num_parameters();
  /// reset_parameters(seed, index) starting from index 0.
  void init_parameters(uint64_t seed);

 protected:
  /// For containers, after `child`'s backward(): calls the hook with `params` (the child's
  /// parameters) when the child is a leaf and a hook is installed.
  void report_grad_ready(Module& child, const std::vector<Parameter*>& params);

  bool training_ = true;
  bool needs_input_grad_ = true;
  GradReadyHook grad_ready_hook_;
};

using ModulePtr = std::shared_ptr<Module>;

}  // namespace tandem::nn
