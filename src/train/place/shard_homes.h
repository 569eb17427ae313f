// ShardedHomes: ZeRO stage 3 over the host homes of streamed parameters (--zero 3
// --param-device cpu under mpirun; Rajbhandari et al. 2020, "ZeRO: Memory Optimizations
// Toward Training Trillion Parameter Models", section 5.3, with DeepSpeed's offload_param).
// Each part's parameters (ParamStreamer's parts: the outer part, each block) are laid out
// flat in two sections, the tensors uploaded in f32 (section A: biases, norms, and every
// tensor in fp32) and those uploaded as a low-precision compute copy (section B: linear and
// embedding weights under bf16/fp16), each padded to a multiple of world_size elements and
// cut into world_size equal contiguous shards (shard_range of tandem/shard_range.h, the shard
// rule of every layout). Rank r keeps shard r of each section for good: the f32 master
// values, and through the optimizer (which is built over pieces(), one Parameter per
// intersection of a tensor with the shard) its state: 12 bytes per parameter over N with
// AdamW (MegaTrain's homes). The f32 gradients go into one transient slab of the largest
// part's shard, which each part's update consumes before the next part's reduce-scatter
// (bind_grads(true)), or into a shard of their own per part where they must outlive the
// backward (clipping, loss scaling, --offload-delay 1). Section B's compute copy is rounded
// from the master values into a scratch buffer at each gather (the one-process streamer rounds
// at upload the same way), except under --offload-delay 1 (enable_delay keeps copies).
//  - gather(part, stage): all-gathers the uploaded sections (A in f32, B in the compute dtype)
//    into a staging buffer of the whole part, which the upload reads;
//  - reduce_grads(part, stage): reduce-scatters (mean over the ranks, as DDP averages) the
//    part's whole f32 gradients, downloaded into a staging buffer, into this rank's shard;
//  - the optimizer then updates this rank's pieces in place (value, compute copy, moments);
//  - gather_values(part, out): the full f32 masters (saving the weights).
// The updates are element-wise (SGD, Adam/AdamW), so every element gets the update a single
// process computes from the averaged gradient: the weights equal one process's within the
// reduction order of the gradient average (the tolerance of --zero 1's).
// Every call is a collective over `comm` (ranks in the same order), except the layout
// queries. A section of no elements issues no collective.
// Thread-safety: the collectives from one thread at a time (ParamStreamer's update thread);
// the layout queries are const and safe anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/comm/communicator.h"
#include "tandem/nn/module.h"
#include "tandem/nn/param_init.h"
#include "tandem/optim/optimizer.h"
#include "tandem/tensor.h"

namespace tandem::train {

/// The host buffers one part is gathered into and its gradients are downloaded into (pinned):
/// `a` [world_size * shard_a] f32, `b` [world_size * shard_b] compute dtype, `grad`
/// [world_size * (shard_a + shard_b)] f32 (section A's gradients, then B's). Sized for the
/// largest part it serves (ShardedHomes::stage_for).
struct ShardStage {
  Tensor a, b, grad;
};

class ShardedHomes {
 public:
  /// `comm`: host buffers (cpu or virt communicator, e.g. mpi_world()). `compute_dtype`: the
  /// dtype of the parameters' compute copies (f32 when none has one).
  ShardedHomes(comm::CommunicatorPtr comm, DType compute_dtype);

  /// Adds a part: `params` with host values (and compute copies where `upload_compute[k]`).
  /// Copies this rank's shards out of them; the caller then drops the full tensors. With a
  /// `source` (a model built without memory, nn::make_model_lazy) the parameters hold shapes
  /// only: this rank's element ranges are written from it and the compute copies rounded from
  /// them (as Module::set_compute_dtype rounds), so no whole tensor is made. Returns the part's
  /// index (0, 1, ... in the order added). Not a collective (every rank holds the same initial
  /// values: broadcast them before, or give every rank the same source). Throws
  /// Error(invalid_argument) for a parameter away from the host or a compute copy of another
  /// dtype; the source's errors.
  int add_part(const std::vector<nn::Parameter*>& params, const std::vector<bool>& upload_compute,
               const nn::ValueSource& source = {});

  /// Where the pieces' gradients live (pinned). `transient` true: one slab of the largest
  /// part's shard serves every part; reduce_grads(p) writes it and part p's update must read it
  /// before the next reduce_grads() (ParamStreamer's update thread runs them in that order).
  /// false: each part keeps its own gradient shard, readable until the next reduce_grads() of
  /// that part. Until called, the pieces have no grad; reduce_grads(), clip_grads() and
  /// enable_delay() bind per-part shards then. Calling again rebinds the pieces' grads (their
  /// contents are not kept). Not a collective.
  void bind_grads(bool transient);
  /// A staging buffer large enough for every part in `parts` (pinned host memory).
  ShardStage stage_for(const std::vector<int>& parts) const;
  /// Views of `stage` laid out as part `part`: per parameter the uploaded tensor (its shape;
  /// section A f32 or section B compute dtype) and the gradient (its shape, f32).
  void views(int part, const ShardStage& stage, std::vector<Tensor>& up, std::vector<Tensor>& grad) const;

  /// Collective: every rank's shards of the part's uploaded sections into `stage` (a, b):
  /// the homes (`copy` -1) or, after enable_delay(), upload copy `copy` (0 or 1).
  void gather(int part, const ShardStage& stage, int copy = -1);
  /// --offload-delay 1: two upload copies of this rank's uploaded sections of every part
  /// (section A's f32 values twice; section B's compute copy itself and once more), which
  /// gather() reads by index while the delayed update writes the other, as ParamStreamer's
  /// upload copies in one process. Pinned; returns the bytes added. Call once, after every
  /// add_part() and sync_flags().
  int64_t enable_delay();
  /// Stand-ins of the part's pieces for the update that writes upload copy `copy`: the
  /// pieces' values and gradients, with section B's compute copy in that copy
  /// (Optimizer::update_part's `as`). After enable_delay().
  const std::vector<nn::Parameter*>& stand_ins(int part, int copy) const {
    return parts_[static_cast<size_t>(part)].stand_ptrs[copy];
  }
  /// After the update that wrote copy `copy`: section A's updated values into it.
  void publish(int part, int copy);
  /// Collective: the mean over the ranks of `stage.grad` (the part's whole gradients) into
  /// this rank's gradient shard; with set_grad_compression, reduce-scattered in that half
  /// type (rounded to nearest even, summed as the communicator sums it) and widened back.
  void reduce_grads(int part, const ShardStage& stage);
  /// --grad-compression fp16|bf16: the dtype reduce_grads sends (f32: uncompressed, the
  /// default). Throws Error(invalid_argument) for another dtype. Call between steps.
  void set_grad_compression(DType dtype);
  /// Collective (--clip-grad-norm): clips the gradients of this rank's pieces as
  /// ops::clip_grad_norm_ clips whole ones, by the global L2 norm over every rank's shards of
  /// the gradients of `order`'s parameters with requires_grad (the model's parameters, in its
  /// order). Each rank's per-parameter sums of squares (double) are all-gathered and added in
  /// the order (parameter, rank), so every rank gets the same bits; one rank calls
  /// ops::clip_grad_norm_ itself over the whole gradients in `order`, the unsharded bits.
  /// `total_norm`: [1] f32 on the host, receives the norm.
  void clip_grads(double max_norm, const std::vector<nn::Parameter*>& order, const Tensor& total_norm);
  /// Collective (dynamic loss scaling): the gradients of this rank's pieces unscaled by `scale`
  /// and checked for inf/NaN as optim::unscale_check_host does (x *= the f32 1 / scale; the
  /// bits of the unsharded check, element by element), then the ranks' flags summed, so that
  /// every rank returns the same verdict: whether any rank's shard held an inf or NaN.
  bool unscale_check(float scale);
  /// Collective: the part's full f32 values, one host tensor per parameter (shaped as it).
  std::vector<Tensor> gather_values(int part);
  /// Cuts this rank's shards anew from the parameters' whole host values (and compute copies,
  /// where defined; else the values rounded to the compute dtype), e.g. after a checkpoint was
  /// loaded into them. Not a collective. Throws Error(invalid_argument) for a parameter whose
  /// value is not a whole f32 host tensor of its shape.
  void reload(int part);

  /// Collective: the optimizer's state of the part's pieces as the unsharded optimizer names
  /// it ("<parameter>.exp_avg", ".exp_avg_sq", ".step" for adam/adamw; ".momentum_buffer" for
  /// sgd with momentum), whole host tensors (checkpoints). `opt` is built over pieces();
  /// nothing before its first step.
  std::vector<nn::NamedTensor> gather_state(int part, const optim::Optimizer& opt) const;
  /// The pieces' share of `state` (as gather_state names it, every part's), named as `opt`
  /// (built over all_pieces()) holds them, for opt.load_state. Throws Error(invalid_argument)
  /// naming a missing tensor or one of another shape.
  std::vector<nn::NamedTensor> cut_state(const std::vector<nn::NamedTensor>& state, const optim::Optimizer& opt) const;

  /// This rank's pieces of part `part` (value views into its shards; grad once bound, see
  /// bind_grads; compute copy only under --offload-delay 1; name "<parameter>[<first element>:<end>]"), and of every part in order. The pieces'
  /// decay and requires_grad follow the parameters' as of the last sync_flags().
  const std::vector<nn::Parameter*>& pieces(int part) const { return parts_[static_cast<size_t>(part)].piece_ptrs; }
  std::vector<nn::Parameter*> all_pieces() const;
  /// Per piece of all_pieces(): the noise stream of its bf16 moments' stochastic rounding
  /// (optim::Adam::set_rounding_streams): its parameter's index in `model_params` (the
  /// unsharded optimizer's order) for a piece from the parameter's first element, so one rank
  /// draws the unsharded noise; a piece cut further in draws a stream of its own (its noise
  /// cannot be the unsharded one's without an element offset in the kernels). Throws
  /// Error(invalid_argument) for a parameter missing from `model_params`.
  std::vector<uint32_t> rounding_streams(const std::vector<nn::Parameter*>& model_params) const;
  /// Copies decay and requires_grad from the parameters to their pieces (after the caller set
  /// them, e.g. --no-decay-bn-bias).
  void sync_flags();

  int parts() const { return static_cast<int>(parts_.size()); }
  int world_size() const { return world_; }
  /// Bytes this rank holds for good: master values, compute copies (--offload-delay 1) and
  /// gradients of its shards, with the shared slab and the gather's scratch (the optimizer's
  /// state comes on top), and the elements of its shards.
  int64_t host_bytes() const;
  int64_t shard_elements() const;
  /// Bytes this rank sends into gather(part) and reduce_grads(part).
  int64_t gather_bytes(int part) const;
  int64_t reduce_bytes(int part) const;
  /// Bytes of one stage for `parts` (stage_for's).
  int64_t stage_bytes(const std::vector<int>& parts) const;

 private:
  struct Tensor1 {  // one parameter's place in its part
    nn::Parameter* param = nullptr;
    bool in_b = false;
    int64_t offset = 0, numel = 0;  // elements, within its section
    Shape shape;
  };
  struct Part {
    std::vector<Tensor1> tensors;
    int64_t shard_a = 0, shard_b = 0;  // elements of one rank's shard of each section
    // This rank's: [shard_a], [shard_b] f32; compute_b [shard_b] only under --offload-delay 1;
    // grad [shard_a + shard_b] (bind_grads: its own, or a view of the shared slab).
    Tensor value_a, value_b, compute_b, grad;
    std::vector<nn::Parameter> pieces;
    std::vector<const nn::Parameter*> piece_of;  // per piece: the parameter it cuts
    struct Cut {
      size_t tensor = 0;           // index in tensors
      int64_t from = 0, len = 0;   // elements of the parameter
      int64_t local = 0;           // offset in this rank's shard of its section
    };
    std::vector<Cut> cuts;  // per piece
    std::vector<nn::Parameter*> piece_ptrs;
    Tensor up_a[2], up_b[2];  // enable_delay: the upload copies of sections A and B
    std::vector<nn::Parameter> stand[2];
    std::vector<nn::Parameter*> stand_ptrs[2];
  };
  // The state slots of an optimizer's pieces: f32 tensors shaped as the piece, and whether a
  // step count is kept per parameter.
  static std::vector<std::string> state_keys(const optim::Optimizer& opt, bool& step);
  comm::CommunicatorPtr comm_;
  int rank_ = 0, world_ = 1;
  DType compute_dtype_;
  DType wire_ = DType::f32;  // set_grad_compression
  std::vector<Part> parts_;
  int64_t max_ab_ = 0, max_b_ = 0;  // the largest part's shard (both sections) and section B's shard
  Tensor slab_;                     // bind_grads(true): [max_ab_] f32, every part's gradients in turn
  Tensor scratch_;                  // [max_b_] compute dtype: section B's values rounded for gather()
  bool grads_bound_ = false;
  // Section B's master values of part p rounded (nearest even) into `out` ([shard_b] compute dtype).
  void round_compute(int p, const Tensor& out) const;
};

}  // namespace tandem::train
