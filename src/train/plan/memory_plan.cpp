// plan_memory: the byte counts of tandem/train/memory_plan.h, following what build_run and the
// step loop allocate (nn modules' buffers, optim::Optimizer::create_state, the offloaded
// optimizer's flat buffers in src/optim/offload.cpp, BatchFeed's prefetcher ring and the
// loader's slots in src/train/batch_feed.cpp and src/data/loader.cpp).
#include <algorithm>
#include <string>
#include <unordered_map>

#include "tandem/data/prefetcher.h"
#include "tandem/device_traits.h"
#include "tandem/error.h"
#include "tandem/nn/gpt.h"
#include "tandem/ops.h"
#include "tandem/stream.h"
#include "tandem/train/memory_plan.h"
#include "train/batch_feed.h"
#include "train/place/param_stream.h"
#include "train/place/stream_layout.h"
#include "train/plan/plan_disk.h"

namespace tandem::train {
namespace {

// Device tensors as the device's allocator counts them (pooled on virt and cuda, exact on the
// cpu); pinned host memory is a caching pool.
int64_t rounded(int64_t bytes, bool pooled) {
  return nn::BufferPlan::rounded(bytes, pooled);
}

Shape batch_shape(int64_t batch, const Shape& sample) {
  Shape s{batch};
  s.insert(s.end(), sample.begin(), sample.end());
  return s;
}

// --param-device cpu (train/place/param_stream.h): the homes in pinned host memory, the
// optimizer's state in pageable host memory, the outer part and the block slots on the device.
// Blocks of equal shapes (a GPT's) have slots of fixed tensors; blocks that differ (a ResNet's)
// share slots of the largest block's bytes, laid out at 256-byte boundaries.
void plan_streamed_parameters(nn::Module& model, const PlanInputs& in, MemoryPlan& p) {
  const bool low = in.compute_dtype != DType::f32;
  const int64_t lp = static_cast<int64_t>(dtype_size(in.compute_dtype));
  const bool adam = in.optimizer == "adam" || in.optimizer == "adamw";
  const bool momentum = in.optimizer == "sgd" && in.momentum != 0;
  if (!streamable(model)) return;  // plan_run refuses the run, naming the model
  const std::vector<int> parts = stream_parts(model, "");
  const std::vector<nn::Parameter*> params = model.parameters();
  int64_t blocks = 0;
  for (int part : parts) blocks = std::max<int64_t>(blocks, part + 1);
  // Per block: its tensors as fixed slot tensors (pool-rounded) and as laid out in a shared slot.
  std::vector<int64_t> fixed(static_cast<size_t>(blocks), 0), fixed_grads(static_cast<size_t>(blocks), 0),
      laid(static_cast<size_t>(blocks), 0);
  std::unordered_map<std::string, int> module_part;  // "layer1.0.bn1" -> its block
  const auto module_of = [](const std::string& name) { return name.substr(0, name.rfind('.')); };
  const auto add_to_block = [&](int part, int64_t bytes, bool grad) {
    fixed[static_cast<size_t>(part)] += rounded(bytes, true);
    if (grad) fixed_grads[static_cast<size_t>(part)] += rounded(bytes, true);
    laid[static_cast<size_t>(part)] += (bytes + 255) / 256 * 256;
  };
  // --optimizer-split: the parts at home on the device (the outer part, then blocks 0, 1, ...).
  const int device_parts = device_parts_for_split(part_elements(stream_layout(model, "")), in.optimizer_split);
  const auto resident = [&](int part) { return part + 1 < device_parts; };
  p.device_update_parts = device_parts;
  // --zero 3 (train/place/shard_homes.h): per part (outer first) the elements uploaded in f32
  // (section A) and as compute copies (B); each rank keeps ceil(n / N) of each section.
  const int64_t shards = std::max(1, in.zero_shards);
  p.zero_shards = shards;
  std::vector<int64_t> sec_a(static_cast<size_t>(blocks + 1), 0), sec_b(static_cast<size_t>(blocks + 1), 0);
  // Not sharded (ParamStreamer's homes): a block's gradients go into transient slabs when the
  // host updates it during the backward (no clipping, loss scaling, delay or accumulation); per
  // part (outer first) the bytes of its slab tensors and of its compute copies' staging.
  const bool transient = !in.clip_grad_norm && !in.loss_scaled && in.offload_delay == 0 && in.grad_accum_steps == 1;
  std::vector<std::vector<int64_t>> slab(static_cast<size_t>(blocks + 1)), staging(static_cast<size_t>(blocks + 1));
  // The disk tier (ParamStreamer::set_disk_tier): per part (outer first) its streamed elements;
  // the compute copies' master values and the state go to disk.
  const bool disk = in.state_on_disk && shards == 1;
  std::vector<std::vector<int64_t>> disk_parts(static_cast<size_t>(blocks + 1));
  bool disk_copies = false;
  for (size_t i = 0; i < params.size(); ++i) {
    nn::Parameter* q = params[i];
    const int64_t n = q->value.numel();
    const bool copy = low && q->low_precision;
    const int64_t up = (copy ? lp : 4) * n;
    const int part = parts[i];
    module_part[module_of(q->name)] = part;
    if (q->requires_grad) p.num_parameters += n;
    if (resident(part)) {  // values, compute copy, gradient and state on the device
      p.on_device.parameters += rounded(4 * n, true) + (copy ? rounded(lp * n, true) : 0);
      p.on_device.gradients += rounded(4 * n, true);
      if (adam) p.on_device.optimizer_state += 2 * rounded(4 * n, true);
      if (momentum) p.on_device.optimizer_state += rounded(4 * n, true);
      p.device_update_elements += n;
      continue;
    }
    if (part == nn::kOuterPart) {
      p.on_device.parameters += rounded(up, true);
      p.on_device.gradients += rounded(4 * n, true);
    } else {
      add_to_block(part, up, false);
      add_to_block(part, 4 * n, true);
    }
    if (shards > 1) {  // counted per part below; accumulation: the whole running sum (ParamStreamer::accum_bytes)
      (copy ? sec_b : sec_a)[static_cast<size_t>(part + 1)] += n;
      if (in.grad_accum_steps > 1) p.on_host.gradients += rounded(4 * n, true);
      continue;
    }
    p.on_host.parameters += rounded((disk && copy ? lp : 4) * n, true);  // the disk tier: the compute copy
    if (disk) disk_parts[static_cast<size_t>(part + 1)].push_back(n), disk_copies = disk_copies || copy;
    if (part == nn::kOuterPart || !transient) {
      p.on_host.gradients += rounded(4 * n, true);
    } else {
      slab[static_cast<size_t>(part + 1)].push_back(4 * n);
    }
    if (copy && in.offload_delay != 1 && !disk) staging[static_cast<size_t>(part + 1)].push_back(lp * n);
    // --offload-delay 1: two copies of what the op reads (the compute copy or the f32 value).
    if (in.offload_delay == 1) p.on_host.parameters += 2 * rounded((copy ? lp : 4) * n, true);
    if (disk) continue;
    if (adam) p.host_pageable += 2 * in.moment_bytes * n;
    if (momentum) p.host_pageable += 4 * n;
  }
  if (disk) plan_streamed_disk_tier(disk_parts, disk_copies, in, adam, momentum, p);
  if (shards == 1) {  // the slabs and staging buffers: as many as ParamStreamer takes, of its largest block
    int64_t streamed = 0, slab_bytes = 0, stage_bytes = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      if (resident(static_cast<int>(b))) continue;
      ++streamed;
      slab_bytes = std::max(slab_bytes, ParamStreamer::laid_out_bytes(slab[static_cast<size_t>(b + 1)]));
      stage_bytes = std::max(stage_bytes, ParamStreamer::laid_out_bytes(staging[static_cast<size_t>(b + 1)]));
    }
    if (slab_bytes > 0)
      p.on_host.gradients += std::min<int64_t>(ParamStreamer::kGradSlabs, streamed) * rounded(slab_bytes, true);
    if (stage_bytes > 0)
      p.on_host.parameters += std::min<int64_t>(ParamStreamer::kStagings, streamed) * rounded(stage_bytes, true);
    if (!staging[0].empty()) p.on_host.parameters += rounded(ParamStreamer::laid_out_bytes(staging[0]), true);
  }
  if (shards > 1) {  // this rank's shards (pinned), its pieces' moments, and the stages
    const auto shard = [&](int64_t n) { return (n + shards - 1) / shards; };
    // ShardedHomes::bind_grads: one gradient slab for every part unless the gradients outlive
    // the backward (the checks' held updates, the delay).
    const bool shared_slab = !in.clip_grad_norm && !in.loss_scaled && in.offload_delay == 0;
    int64_t max_a = 0, max_b = 0, max_ab = 0, all_ab = 0, all_b = 0;
    for (size_t k = 0; k < sec_a.size(); ++k) {
      const int64_t a = shard(sec_a[k]), b = shard(sec_b[k]);
      // ShardedHomes::add_part: values A and B (each at least 1 element)
      p.on_host.parameters += rounded(4 * std::max<int64_t>(a, 1), true) + rounded(4 * std::max<int64_t>(b, 1), true);
      if (!shared_slab) p.on_host.gradients += rounded(4 * std::max<int64_t>(a + b, 1), true);
      // --offload-delay 1 (ShardedHomes::enable_delay): B's compute copy, values A twice and
      // B's compute copy once more.
      if (in.offload_delay == 1)
        p.on_host.parameters += 2 * rounded(4 * std::max<int64_t>(a, 1), true) + 2 * rounded(lp * std::max<int64_t>(b, 1), true);
      if (adam) p.host_pageable += 2 * in.moment_bytes * (a + b);
      if (momentum) p.host_pageable += 4 * (a + b);
      if (k > 0) max_a = std::max(max_a, a), max_b = std::max(max_b, b), max_ab = std::max(max_ab, a + b);
      all_ab = std::max(all_ab, a + b), all_b = std::max(all_b, b);
    }
    if (shared_slab) p.on_host.gradients += rounded(4 * std::max<int64_t>(all_ab, 1), true);
    // ShardedHomes::gather: section B's values rounded into a scratch of the largest part's.
    if (in.offload_delay != 1 && all_b > 0) p.on_host.parameters += rounded(lp * all_b, true);
    // ShardedHomes::stage_for: the outer part's stage, then one per slot sized for every block.
    const auto stage = [&](int64_t a, int64_t b, int64_t ab, int64_t& values, int64_t& grads) {
      values = rounded(4 * std::max<int64_t>(shards * a, 1), true) + rounded(lp * std::max<int64_t>(shards * b, 1), true);
      grads = rounded(4 * std::max<int64_t>(shards * ab, 1), true);
    };
    int64_t values = 0, grads = 0;
    stage(shard(sec_a[0]), shard(sec_b[0]), shard(sec_a[0]) + shard(sec_b[0]), values, grads);
    p.on_host.parameters += values;
    p.on_host.gradients += grads;
    p.stage_bytes = values + grads;
    stage(max_a, max_b, max_ab, values, grads);
    const int64_t slots = ParamStreamer::slots_for(blocks, in.param_prefetch);
    p.on_host.parameters += slots * values;
    p.on_host.gradients += slots * grads;
    p.stage_bytes += slots * (values + grads);
  }
  // Module buffers (BatchNorm's running statistics) move with their part; 0-d counters stay.
  for (const nn::NamedTensor& t : model.state_dict()) {
    if (t.is_parameter || t.tensor.dim() == 0) continue;
    const int64_t bytes = static_cast<int64_t>(t.tensor.nbytes());
    const auto it = module_part.find(module_of(t.name));
    const int part = it == module_part.end() ? nn::kOuterPart : it->second;
    if (resident(part)) {
      p.on_device.parameters += rounded(bytes, true);
      continue;
    }
    p.on_host.parameters += rounded(bytes, true);
    if (part == nn::kOuterPart) {
      p.on_device.parameters += rounded(bytes, true);
    } else {
      add_to_block(part, bytes, false);
    }
  }
  // The streamed blocks only (the device's are not in the slots).
  const size_t skip = static_cast<size_t>(std::max(0, device_parts - 1));
  fixed.erase(fixed.begin(), fixed.begin() + static_cast<std::ptrdiff_t>(skip));
  fixed_grads.erase(fixed_grads.begin(), fixed_grads.begin() + static_cast<std::ptrdiff_t>(skip));
  laid.erase(laid.begin(), laid.begin() + static_cast<std::ptrdiff_t>(skip));
  blocks -= static_cast<int64_t>(skip);
  p.streamed_blocks = blocks;
  p.slots = ParamStreamer::slots_for(blocks, in.param_prefetch);
  if (blocks == 0) return;
  const bool equal = std::all_of(laid.begin(), laid.end(), [&](int64_t b) { return b == laid[0]; });
  const size_t largest = static_cast<size_t>(std::max_element(laid.begin(), laid.end()) - laid.begin());
  p.slot_bytes = equal ? fixed[0] : rounded(laid[largest], true);
  // The slots hold values and gradients: shown as parameters and gradients in the proportion
  // of the largest block's.
  const int64_t grads = equal ? fixed_grads[0] : p.slot_bytes * fixed_grads[largest] / std::max<int64_t>(1, fixed[largest]);
  p.on_device.parameters += p.slots * (p.slot_bytes - grads);
  p.on_device.gradients += p.slots * grads;
}

// The parameters, gradients and optimizer state of `model` on both sides.
void plan_parameters(nn::Module& model, const PlanInputs& in, MemoryPlan& p) {
  if (in.params_streamed) {
    plan_streamed_parameters(model, in, p);
    return;
  }
  const bool dev = !in.device.is_host();
  const bool low = in.compute_dtype != DType::f32;
  const int64_t lp = static_cast<int64_t>(dtype_size(in.compute_dtype));
  const bool adam = in.optimizer == "adam" || in.optimizer == "adamw";
  const bool momentum = in.optimizer == "sgd" && in.momentum != 0;
  int64_t flat = 0, state = 0;
  for (nn::Parameter* q : model.parameters()) {
    const int64_t n = q->value.numel();
    p.on_device.parameters += rounded(4 * n, dev);
    if (low && q->low_precision) p.on_device.parameters += rounded(lp * n, dev);
    p.on_device.gradients += rounded(4 * n, dev);  // every parameter has one (frozen ones too)
    if (q->requires_grad) p.num_parameters += n;
    if (adam) state += 2 * rounded(in.moment_bytes * n, dev);
    if (momentum) state += rounded(4 * n, dev);
    flat += (n + 15) / 16 * 16;  // the offloaded optimizer's 64-byte aligned ranges
  }
  // Buffers of the state dict (BatchNorm's running statistics) move with the model; 0-d
  // counters (num_batches_tracked) stay on the host (nn::Module::to).
  for (const nn::NamedTensor& t : model.state_dict())
    if (!t.is_parameter && t.tensor.dim() > 0)
      p.on_device.parameters += rounded(static_cast<int64_t>(t.tensor.nbytes()), dev);
  if (!in.optimizer_offloaded) {
    p.on_device.optimizer_state += state;
    return;
  }
  // optim::OffloadOptimizer: flat pinned master, gradients (two with delay 1) and moments;
  // under bf16/fp16 the compute-dtype gradients and parameters besides, and a device buffer
  // the gradients are rounded into.
  const int64_t copies = in.offload_delay == 1 ? 2 : 1;
  if (!in.state_on_disk) p.on_host.parameters += rounded(4 * flat, true);  // the disk tier: in its files
  p.on_host.gradients += copies * rounded(4 * flat, true);
  if (low) {
    p.on_host.gradients += copies * rounded(lp * flat, true);
    p.on_host.parameters += rounded(lp * flat, true);
    p.on_device.gradients += rounded(lp * flat, dev);
  }
  if (in.state_on_disk) {  // the disk tier: master and moments in files, a window of buckets in memory
    plan_disk_tier(model, in, adam, momentum, p);
    return;
  }
  if (adam) p.on_host.optimizer_state += 2 * rounded(in.moment_bytes * flat, true);
  if (momentum) p.on_host.optimizer_state += rounded(4 * flat, true);
}

// The model's buffers for a training step and for an evaluation forward.
// A batch larger than the training set is refused by build_run after the plan (no batch
// under drop_last); the plan counts what the set holds, so huge values cannot overflow.
int64_t step_batch(const PlanInputs& in) {
  return in.train_samples > 0 ? std::min(in.batch_size, in.train_samples) : in.batch_size;
}

void plan_activations(nn::Module& model, const PlanInputs& in, MemoryPlan& p) {
  nn::BufferPlan train;
  if (!in.device.is_host()) runtime_for(in.device);  // its backend answers the layout question
  train.pooled = !in.device.is_host();
  train.preferred = ops::preferred_memory_format(in.device, in.compute_dtype);
  nn::BufferPlan eval = train.inner();
  eval.training = false;
  try {
    model.plan_buffers(batch_shape(step_batch(in), in.input_sample), in.compute_dtype, train);
    if (in.eval_batch_size > 0 && in.test_samples > 0)
      model.plan_buffers(
          batch_shape(std::min(in.eval_batch_size, in.test_samples), in.input_sample),
          in.compute_dtype, eval);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::not_available) throw;
    p.activations_note = e.what();
    return;
  }
  p.activations_step = train.total();
  p.activations_kept = train.kept;
  // An evaluation forward replaces the forward buffers at its batch; those only training
  // makes stay as the last step left them.
  p.activations_eval =
      in.eval_batch_size > 0 && in.test_samples > 0 ? eval.total() + train.kept_train_only : 0;
  if (in.activations_offloaded && p.recompute_blocks > 0 && !in.device.is_host()) {
    const int64_t in_flight = std::min(p.activations_kept, 2 * (p.activations_kept / p.recompute_blocks));
    p.host_activations = p.activations_kept;
    p.host_pageable += p.host_activations;
    p.activations_step -= p.activations_kept - in_flight;
  }
  p.on_device.activations = std::max(p.activations_step, p.activations_eval);
}

// The loss's buffers (image models), the metrics, the clipping norm.
void plan_workspace(const PlanInputs& in, MemoryPlan& p) {
  const bool dev = !in.device.is_host();
  int64_t w = rounded(4 * 4, dev);  // the metrics accumulator [4] f32
  if (!in.fused_loss && in.num_classes > 0) {
    const int64_t rows = step_batch(in);
    w += rounded(4 * rows * in.num_classes, dev);  // probabilities, f32
    w += rounded(static_cast<int64_t>(dtype_size(in.compute_dtype)) * rows * in.num_classes,
                 dev);  // dlogits
  }
  if (in.clip_grad_norm) w += rounded(4, dev);
  p.on_device.workspace += w;
}

struct FeedCounts {
  int64_t device_batches = 0, host_slots = 0, batch = 0;
};

// One feed as BatchFeed builds it: `drop_last` batches of `batch` from `samples`.
FeedCounts feed_counts(int64_t samples, int64_t batch, bool drop_last, int64_t sample_bytes,
                       const PlanInputs& in, bool host) {
  FeedCounts f;
  const int64_t nb = drop_last ? samples / batch : samples / batch + (samples % batch != 0 ? 1 : 0);
  f.batch = std::max<int64_t>(1, std::min(batch, samples));
  if (nb <= 0) return f;
  const int64_t batch_bytes = std::max<int64_t>(1, f.batch * sample_bytes);
  // host_lead (batch_feed.cpp): 2K, at most an epoch's batches, kMaxHostLead and 256 MiB.
  const int64_t lead =
      std::min<int64_t>({2 * std::min<int64_t>(in.log_interval, data::kMaxHostLead), nb,
                         data::kMaxHostLead, (int64_t{256} << 20) / batch_bytes});
  const int64_t consumer = host ? 1 : kPrefetchDepth + lead;
  f.host_slots =
      std::min<int64_t>(int64_t{in.num_workers} * in.prefetch_factor, nb) + std::min(consumer, nb);
  f.device_batches = host ? 0 : kPrefetchDepth + lead + 1;
  return f;
}

void plan_batches(const PlanInputs& in, MemoryPlan& p) {
  int64_t sample_bytes = 0;
  for (int64_t b : in.field_bytes) sample_bytes += b;
  const auto bytes_of = [&](int64_t batch) {
    int64_t s = 0;
    for (int64_t b : in.field_bytes)
      s += rounded(batch * b, !p.host_device);  // pinned or device pools
    return s;
  };
  for (const bool train : {true, false}) {
    const int64_t samples = train ? in.train_samples : in.test_samples;
    const int64_t batch = train ? in.batch_size : in.eval_batch_size;
    if (samples <= 0 || batch <= 0) continue;
    const FeedCounts f = feed_counts(samples, batch, train, sample_bytes, in, p.host_device);
    const int64_t one = bytes_of(f.batch);
    // A cpu run's slots are pageable host memory: the "device" column.
    (p.host_device ? p.on_device : p.on_host).batches += f.host_slots * one;
    p.on_device.batches += f.device_batches * one;
  }
}

}  // namespace

MemoryPlan plan_memory(nn::Module& model, const PlanInputs& in) {
  TD_CHECK_ARG(in.batch_size >= 1, "plan", "expected batch_size >= 1, found {}", in.batch_size);
  MemoryPlan p;
  p.device = in.device.str();
  p.host_device = in.device.is_host();
  p.device_in_host_ram = device_memory_is_host_ram(in.device);
  const int64_t blocks = model.set_recompute(in.recompute);
  p.recompute_blocks = in.recompute ? blocks : 0;
  p.recomputable_blocks = in.recompute ? blocks : model.set_recompute(false);
  p.streamable = streamable(model);
  plan_parameters(model, in, p);
  p.batch_size = in.batch_size;
  p.host_moments_fp32 = (in.optimizer == "adam" || in.optimizer == "adamw") && in.moment_bytes == 4 &&
                        (in.optimizer_offloaded || in.params_streamed) && in.zero_shards == 1;
  plan_activations(model, in, p);
  plan_workspace(in, p);
  plan_batches(in, p);
  return p;
}

}  // namespace tandem::train
