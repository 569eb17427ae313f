#include "train/plan/plan_run.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tandem/nn/models.h"
#include "train/home/home_choice.h"
#include "train/home/homes.h"
#include "train/place/param_stream.h"

namespace tandem::train {

static int64_t share(int64_t samples, int world_size) {
  return (samples + world_size - 1) / world_size;
}

PlanInputs plan_inputs(const Run& r, int world_size) {
  const TrainConfig& cfg = r.cfg;
  PlanInputs in;
  in.device = r.device;
  in.compute_dtype = r.compute_dtype;
  in.batch_size = cfg.batch_size;
  in.eval_batch_size = cfg.eval_batch_size;
  // The fields a batch holds (images [C, H, W] in the compute dtype and labels [] i64, or token
  // windows and their targets).
  const std::vector<data::Field>& fields = r.train_data->fields();
  const int input = data::find_field(fields, data::FieldRole::input);
  if (input >= 0) in.input_sample = fields[static_cast<size_t>(input)].shape;
  for (const data::Field& f : fields) in.field_bytes.push_back(static_cast<int64_t>(f.bytes()));
  in.train_samples = share(r.train_data->size(), world_size);
  in.test_samples = share(r.test_data->size(), world_size);
  if (r.token_data()) {
    in.fused_loss = true;
  } else {
    in.num_classes = r.spec.num_classes;
  }
  in.num_workers = cfg.num_workers;
  in.prefetch_factor = cfg.prefetch_factor;
  in.log_interval = cfg.log_interval;
  in.optimizer = cfg.optimizer;
  in.moment_bytes = cfg.optimizer_moments == "bf16" ? 2 : 4;
  in.momentum = cfg.momentum;
  in.clip_grad_norm = cfg.clip_grad_norm > 0;
  in.loss_scaled = uses_loss_scaler(cfg);
  in.recompute = cfg.recompute == "blocks";
  in.activations_offloaded = cfg.activations_device == "cpu";
  // Where the parameters, gradients and optimizer state will live: the home's to say.
  choose_home(cfg, world_size).plan(cfg, in);
  if (!cfg.device_memory_budget.empty())
    in.device_memory_budget = parse_byte_size(cfg.device_memory_budget, "--device-memory-budget");
  in.max_pinned_bytes =
      cfg.max_pinned_gb > 0  // any cap is at least one byte
          ? std::max<int64_t>(1, static_cast<int64_t>(cfg.max_pinned_gb * static_cast<double>(int64_t{1} << 30)))
          : 0;
  in.max_host_bytes =
      cfg.max_host_gb > 0 ? std::max<int64_t>(1, static_cast<int64_t>(cfg.max_host_gb * static_cast<double>(int64_t{1} << 30)))
                          : 0;
  return in;
}

MemoryPlan plan_run(const Run& r, int world_size) {
  const PlanInputs in = plan_inputs(r, world_size);
  // As the training feed will refuse it (drop_last), before the plan counts a batch the data
  // cannot fill (an empty set is refused by the feed, as such).
  TD_CHECK_ARG(in.train_samples == 0 || in.batch_size <= in.train_samples, "train",
               "--batch-size {} is larger than the {} training samples{} (drop_last leaves no batch)", in.batch_size,
               in.train_samples, world_size > 1 ? " of a rank" : "");
  const nn::ModulePtr shapes = nn::make_model_shapes(r.cfg.model, r.spec);
  MemoryPlan p;
  if (in.params_streamed && in.param_prefetch == -1) {  // auto: the deepest that fits the device
    PlanInputs at = in;
    for (int depth = ParamStreamer::kMaxPrefetchDepth; depth >= 1; --depth) {
      at.param_prefetch = depth;
      p = plan_memory(*shapes, at);
      apply_limits(p, at);
      if (p.device_budget <= 0 && depth > 1) {  // no budget known: the default depth
        depth = 2;
        continue;
      }
      if (device_fits(p)) break;
    }
    p.param_prefetch = at.param_prefetch;
    p.param_prefetch_auto = true;
  } else {
    p = plan_memory(*shapes, in);
    p.param_prefetch = std::max(1, in.param_prefetch);
  }
  if (in.recompute) check_recompute_blocks(p.recompute_blocks, r.cfg.model);
  TD_CHECK_ARG(!in.params_streamed || (p.streamed_blocks > 0 && !in.device.is_host()), "train",
               "--param-device cpu: expected a GPT ({}) or a ResNet on an accelerator --device, got model {} on {}",
               fmt::join(nn::sequence_model_names(), ", "), r.cfg.model, in.device.str());
  apply_limits(p, in);
  return p;
}

void check_recompute_blocks(int64_t blocks, const std::string& model) {
  TD_CHECK_ARG(blocks > 0, "train",
               "--recompute blocks: model {} has no block that recomputes (expected a GPT ({}) or a ResNet)", model,
               fmt::join(nn::sequence_model_names(), ", "));
}

}  // namespace tandem::train
