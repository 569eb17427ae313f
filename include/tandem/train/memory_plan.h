// The memory plan of a training run: bytes per category on the device and on the host,
// counted from the model's parameter shapes (nn::make_model_shapes, which allocates nothing),
// the batch, the precision, the optimizer and its placement, recompute and the data feeds,
// before anything of the run is allocated. `tandem train` prints it before training
// (--plan-only prints it and exits) and refuses a run that does not fit (check_memory_plan).
//
// Categories (docs/memory.md), each tensor rounded up to 512 bytes as the caching allocators
// hand them out (tandem/caching_allocator.h):
//  - parameters: f32 values, the state dict's buffers (BatchNorm running statistics), and under
//    bf16/fp16 the compute copies of the convolution, linear and embedding weights; with
//    --optimizer-device cpu also the host's fp32 master copy (flat, each parameter padded to 16
//    floats) and its compute-dtype upload buffer;
//  - gradients: f32 gradients; offloaded, the host's flat gradients (two with
//    --offload-delay 1) and, under bf16/fp16, the device's and host's compute-dtype copies;
//  - optimizer state: Adam/AdamW exp_avg and exp_avg_sq (8 bytes per parameter), SGD with
//    momentum its momentum_buffer (4), on the device or, offloaded, in pinned host memory;
//  - with --param-device cpu (a GPT or a ResNet): on the device the outer part (embeddings,
//    ln_f) and ParamStreamer::slots_for(blocks, --param-prefetch) block slots, each one
//    block's uploaded tensors (the compute copy of linear and embedding weights under
//    bf16/fp16, else f32) and its f32 gradients; in pinned
//    host memory every parameter's f32 value (parameters), the staging buffers the compute
//    copies are rounded into (parameters: the outer part's and ParamStreamer::kStagings of the
//    largest block's), and the f32 gradients: the outer part's, and the blocks' in
//    ParamStreamer::kGradSlabs slabs of the largest block when the host updates each block
//    during the backward, else every block's own (--clip-grad-norm, --offload-delay 1,
//    --grad-accum-steps > 1); --offload-delay 1 adds two copies of what each op reads; the
//    optimizer's state in pageable host memory (host_pageable); --zero 3 keeps its shards'
//    layout (values, compute copies and gradients per shard, the stages), and with
//    --grad-accum-steps > 1 adds each rank's whole f32 accumulation home (gradients);
//  - activations: the module buffers of one training step at its peak (nn/buffer_plan.h:
//    every module's outputs, saved statistics and input gradients; with --recompute blocks
//    the block outputs plus one block's internals); an evaluation forward at
//    --eval-batch-size is planned beside it and the larger counts;
//  - workspace: the loss's probabilities and gradient (image models), the metrics and the
//    clipping norm. Scratch the backends allocate inside an op (cuDNN/cuBLAS workspaces,
//    oneDNN's host scratch) is not counted;
//  - batches: the device ring of the prefetchers (prefetch_depth + host lead + 1 batches for
//    training and for evaluation) and the loaders' host slots (pinned when a device consumes
//    them: workers x prefetch_factor + the prefetcher's slots, at most an epoch's batches).
// For a cpu run the "device" is the host's pageable memory.
// Thread-safety: pure functions of their arguments (plan_training reads data set headers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/device.h"
#include "tandem/dtype.h"
#include "tandem/nn/module.h"
#include "tandem/train/config.h"

namespace tandem::train {

/// Bytes per category on one side.
struct MemoryCategories {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t activations = 0;
  int64_t workspace = 0;
  int64_t batches = 0;
  int64_t total() const {
    return parameters + gradients + optimizer_state + activations + workspace + batches;
  }
};

/// What plan_memory counts from besides the model.
struct PlanInputs {
  Device device;                     // where the model computes
  DType compute_dtype = DType::f32;  // --precision
  int64_t batch_size = 128;          // samples per step (per rank)
  int64_t eval_batch_size = 512;     // samples per evaluation batch (0: no evaluation feed)
  Shape input_sample;                // one sample of the model's input: [C, H, W] or [T]
  std::vector<int64_t> field_bytes;  // bytes per sample of each batch field (input, target, ...)
  int64_t train_samples = 0;         // samples of the training set (this rank's)
  int64_t test_samples = 0;          // samples of the test set (this rank's)
  int64_t num_classes = 0;           // image models: the logits' classes (the loss's buffers)
  bool fused_loss = false;           // a language model computing its loss itself
  int num_workers = 1, prefetch_factor = 2;
  int64_t log_interval = 10;         // K: the step loop's lead is 2K batches
  std::string optimizer = "adamw";   // sgd | adam | adamw
  int64_t moment_bytes = 4;          // bytes per element of Adam's two moments (--optimizer-moments bf16: 2)
  double momentum = 0.9;             // SGD
  bool optimizer_offloaded = false;  // --optimizer-device cpu
  int offload_delay = 0;             // --offload-delay
  bool clip_grad_norm = false;       // --clip-grad-norm > 0
  bool loss_scaled = false;          // dynamic loss scaling (fp16, --loss-scale dynamic)
  bool recompute = false;            // --recompute blocks (plan_memory sets it on the model)
  bool activations_offloaded = false;  // --activations-device cpu: the kept block inputs wait on the host
  bool params_streamed = false;      // --param-device cpu (a GPT: train/place/param_stream.h)
  int param_prefetch = 1;            // --param-prefetch: blocks uploaded ahead (slots: that + 2); -1: auto
  double optimizer_split = 1.0;      // --optimizer-split: the host's share of a streamed run's update
  int zero_shards = 1;               // --zero 3 under mpirun: the ranks a streamed run's host state is sharded over
  int64_t grad_accum_steps = 1;      // --grad-accum-steps (sharded streamed homes add an accumulation home)
  // --device-memory-budget in bytes, in place of the device's own limit (also above it: an
  // allocation that fails is then the step's out-of-memory error); 0: the device's own.
  int64_t device_memory_budget = 0;
  int64_t max_pinned_bytes = 0;      // --max-pinned-gb in bytes; 0: no cap
  // The disk tier (--optimizer-state-device disk): the offloaded optimizer's master copy and
  // moments in files, a window of `disk_window_units` buckets of --bucket-cap-mb in pageable
  // host memory; with params_streamed the streamed parts' master values (of the parameters
  // uploaded as compute copies, which stay pinned) and state, a window of that many parts;
  // `offload_dir`'s free space is the disk's limit.
  bool state_on_disk = false;
  double bucket_cap_mb = 25.0;
  int disk_window_units = 5;
  std::string offload_dir;
  int64_t max_host_bytes = 0;        // --max-host-gb in bytes (pinned and pageable); 0: no cap
};

struct MemoryPlan {
  std::string device;            // e.g. "virt:0"
  bool host_device = false;      // a cpu run: on_device is the host's pageable memory
  // The device's bytes are host RAM (cpu; virt that computes: device_memory_is_host_ram), so
  // they count against MemAvailable as well as against the device's own limit.
  bool device_in_host_ram = false;
  MemoryCategories on_device;    // activations: max(training step, evaluation forward)
  MemoryCategories on_host;      // pinned host memory (and, for a cpu run, nothing else)
  int64_t num_parameters = 0;    // trainable elements
  int64_t activations_step = 0;  // a training step's activations at their peak
  int64_t activations_kept = 0;  // of which held from the forward through the backward
  int64_t activations_eval =
      0;  // an evaluation forward's (with the training-only buffers it leaves)
  int64_t recompute_blocks = 0;  // blocks that recompute
  // --param-device cpu: the host optimizer's state in pageable host memory (the parameters'
  // values and gradients are in on_host, pinned), and the blocks streamed through the device.
  int64_t host_pageable = 0;
  // --activations-device cpu: of host_pageable, the kept block inputs waiting on the host (the
  // device then holds the step's activations less those, with two blocks' in flight).
  int64_t host_activations = 0;
  int64_t streamed_blocks = 0, slots = 0, slot_bytes = 0;
  // The prefetch depth planned; with --param-prefetch auto the deepest of 8 .. 1 whose device
  // total fits the budget (1 without a budget, or when none fits: the plan then refuses).
  int param_prefetch = 1;
  bool param_prefetch_auto = false;
  // --zero 3: the ranks the host homes are sharded over (1: not sharded), and the pinned stages
  // the parts are gathered into (counted in on_host: values as parameters, gradients as such).
  int64_t zero_shards = 1, stage_bytes = 0;
  // --optimizer-split: the parts at home on the device and updated there, and their elements.
  int64_t device_update_parts = 0, device_update_elements = 0;
  // What the model allows, for the hints of a run that does not fit: blocks --recompute blocks
  // would recompute, and whether --param-device cpu can stream it (a GPT or a ResNet).
  int64_t recomputable_blocks = 0;
  bool streamable = false;
  std::string activations_note;  // "" or why the activations were not planned (then counted 0)
  // For the refusal's advice: the training batch planned, and whether Adam's moments are fp32
  // in host memory (--optimizer-moments bf16 would halve them).
  int64_t batch_size = 0;
  bool host_moments_fp32 = false;
  // The limits the plan was checked against (0 / "" when none applies).
  int64_t device_budget = 0;
  std::string device_budget_source;  // "--device-memory-budget", "memory_mb of virt:0", ...
  int64_t max_pinned = 0;
  int64_t host_available = 0;  // MemAvailable of /proc/meminfo when read
  int64_t pinned() const { return on_host.total(); }
  // The disk tier: what lives in files (master weights as parameters, moments as optimizer
  // state), the window of it in pageable host memory (in host_pageable), the folder and its
  // free bytes (-1: not read), and --max-host-gb (0: no cap) over pinned plus pageable.
  MemoryCategories on_disk;
  int64_t disk_window = 0;
  std::string offload_dir;
  int64_t disk_available = -1;
  int64_t max_host = 0;
  int64_t host_total() const { return pinned() + host_pageable; }
};

/// Counts the plan for `model` (its parameters() and plan_buffers(); a shape-only model from
/// nn::make_model_shapes, or a real one, whose tensors are not touched) and `in`; sets
/// model.set_recompute(in.recompute). Allocates no tensor (it makes the device's runtime exist,
/// as resolve_device does). Throws Error(not_available) for a device this build or machine lacks.
/// A model without a buffer estimate gets activations 0 and a note. The budgets are recorded,
/// not checked (check_memory_plan).
MemoryPlan plan_memory(nn::Module& model, const PlanInputs& in);

/// The plan of `cfg`'s run as build_run would make it: validates the flags, resolves the
/// device, opens the data sets (for their sizes and sample shapes) and builds the model shape
/// only; no parameter, device or pinned memory is allocated. Errors as build_run's for bad
/// flags, data and devices; Error(invalid_argument) for --devices and --place (not planned).
MemoryPlan plan_training(const TrainConfig& cfg);

/// The device limit that applies to `in` (the budget flag, else device_memory_limit of the
/// device), into plan.device_budget / device_budget_source; host figures from /proc/meminfo.
void apply_limits(MemoryPlan& plan, const PlanInputs& in);

/// Throws Error(out_of_memory, "[train] needs 34.2 GiB of device memory, 21.8 GiB available
/// (--device-memory-budget); try ...") when the device total passes device_budget, the pinned
/// total passes max_pinned (--max-pinned-gb), pinned plus pageable pass max_host
/// (--max-host-gb; the message gives the device, host and disk figures and names the disk
/// tier when the optimizer's state could move there), the disk tier's files pass the
/// folder's free space, or the host's share passes MemAvailable; the
/// hint names the knobs that shrink the figure (--batch-size, --recompute blocks,
/// --optimizer-device cpu, --num-workers / --prefetch-factor, --log-interval).
void check_memory_plan(const MemoryPlan& plan);
/// Whether the plan's device total (in the pool's whole segments) fits its device budget (true
/// without one): the part of check_memory_plan that --param-prefetch auto asks at each depth.
bool device_fits(const MemoryPlan& plan);

/// The plan as a compact table (one line per category, device and host columns, in MiB or
/// GiB), ending in a newline.
std::string format_memory_plan(const MemoryPlan& plan);
/// The host's share of the training state: the pinned parameters (values, compute copies,
/// staging), gradients and optimizer state, and the pageable optimizer state (bytes). The
/// printed plan divides it by the parameters for --param-device cpu ("host bytes per
/// parameter"); the metrics file's plan holds it as "host_state_bytes".
int64_t host_state_bytes(const MemoryPlan& plan);
/// The plan as one JSON object (bytes), for the metrics file's "run" record.
std::string memory_plan_json(const MemoryPlan& plan);

/// Parses a byte size: a plain integer (bytes) or a number with B, KiB, MiB, GiB, TiB (powers
/// of 1024) or KB, MB, GB, TB (powers of 1000), e.g. "21.8GiB". Throws
/// Error(invalid_argument, "[train] FLAG TEXT: expected bytes or a size like 24GiB") naming `flag`.
int64_t parse_byte_size(const std::string& text, const char* flag);

}  // namespace tandem::train
