#include "train/checkpoint/run_flags.h"

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/thread_pool.h"

namespace tandem::train::checkpoint {

using json = nlohmann::json;

// The flags that decide the math: the same weights and figures need the same values.
static json math_flags(const TrainConfig& c) {
  return {{"--data", c.data_dir},
          {"--dataset", c.dataset},
          {"--label", c.label},
          {"--val-split", c.val_split},
          {"--image-size", c.image_size},
          {"--resize-size", c.resize_size},
          {"--mean", c.mean},
          {"--std", c.std},
          {"--skip-corrupt", c.skip_corrupt},
          {"--shuffle", c.shuffle},
          {"--model", c.model},
          {"--zero-init-residual", c.zero_init_residual},
          {"--init", c.init},
          {"--init-exclude", c.init_exclude},
          {"--no-decay-bn-bias", c.no_decay_bn_bias},
          {"--pct-start", c.pct_start},
          {"--epochs", c.epochs},
          {"--max-steps", c.max_steps},
          {"--grad-accum-steps", c.grad_accum_steps},
          {"--n-layer", c.n_layer},
          {"--n-head", c.n_head},
          {"--n-embd", c.n_embd},
          {"--block-size", c.block_size},
          {"--batch-size", c.batch_size},
          {"--lr", c.lr},
          {"--optimizer", c.optimizer},
          {"--optimizer-moments", c.optimizer_moments},
          {"--weight-decay", c.weight_decay},
          {"--momentum", c.momentum},
          {"--nesterov", c.nesterov},
          {"--beta1", c.beta1},
          {"--beta2", c.beta2},
          {"--eps", c.eps},
          {"--schedule", c.schedule},
          {"--warmup-epochs", c.warmup_epochs},
          {"--warmup-steps", c.warmup_steps},
          {"--step-size", c.step_size_epochs},
          {"--gamma", c.gamma},
          {"--label-smoothing", c.label_smoothing},
          {"--seed", c.seed},
          {"--offload-delay", c.offload_delay},
          {"--offload-delay-warmup", c.offload_delay_warmup},
          {"--simd", c.simd},
          {"--augment", c.augment},
          {"--log-interval", c.log_interval},
          {"--precision", c.precision},
          {"--loss-scale", c.loss_scale},
          {"--loss-scale-init", c.loss_scale_init},
          {"--clip-grad-norm", c.clip_grad_norm},
          // The replicas' parts set the order of the gradients' sums (and BatchNorm's batches).
          {"--devices", c.devices},
          {"--split", c.split},
          // oneDNN's kernels split their sums by thread: another count changes the last bits.
          {"--threads", c.threads > 0 ? c.threads : available_cores()}};
}

json flags_json(const TrainConfig& c) {
  json j = math_flags(c);
  j["--device"] = c.device;
  j["--optimizer-device"] = c.optimizer_device;
  j["--bucket-cap-mb"] = c.bucket_cap_mb;
  j["--dist-timeout"] = c.dist_timeout;
  j["--grad-compression"] = c.grad_compression;
  j["--zero"] = c.zero;
  j["--num-workers"] = c.num_workers;
  j["--prefetch-factor"] = c.prefetch_factor;
  j["--eval-batch-size"] = c.eval_batch_size;
  j["--eval-interval"] = c.eval_interval;
  j["--checkpoint-every"] = c.checkpoint_every;
  j["--keep-checkpoints"] = c.keep_checkpoints;
  return j;
}

// Flags added after checkpoints were first written: a checkpoint without them ran at their
// default, so a run at the default resumes it.
static bool unrecorded_default(const std::string& key, const json& value) {
  static const json defaults = {
      {"--precision", "fp32"},   {"--loss-scale", "auto"}, {"--clip-grad-norm", 0.0},
      {"--devices", ""},         {"--split", "auto"},      {"--max-steps", 0},
      {"--grad-accum-steps", 1}, {"--n-layer", 0},         {"--n-head", 0},
      {"--n-embd", 0},           {"--block-size", 0},
      {"--warmup-steps", -1},    {"--loss-scale-init", 65536.0}};
  const auto d = defaults.find(key);
  return d != defaults.end() && *d == value;
}

std::string check_resume_flags(const json& saved, const TrainConfig& now, bool force, const std::string& path) {
  std::string diffs, refused;  // every differing flag, named at once
  json want = math_flags(now);
  // In bf16/fp16 the offloaded optimizer takes gradients rounded to the low precision where the
  // device's takes f32 ones, so there the optimizer device changes the math too.
  if (now.precision != "fp32") want["--optimizer-device"] = now.optimizer_device;
  for (auto it = want.begin(); it != want.end(); ++it) {
    const auto s = saved.find(it.key());
    const std::string was = s == saved.end() ? "(not recorded)" : s->dump();
    if (s != saved.end() && *s == it.value()) continue;
    if (s == saved.end() && unrecorded_default(it.key(), it.value())) continue;
    refused += fmt::format("{}{} {} (given or its default) differs from the checkpoint's {}", refused.empty() ? "" : "; ",
                           it.key(), it.value().dump(), was);
    diffs += fmt::format("{}{}: now {}, checkpoint {}", diffs.empty() ? "" : "\n", it.key(), it.value().dump(), was);
  }
  if (!force && !refused.empty())
    throw_error(ErrorCode::invalid_argument, "train",
                fmt::format("--resume {}: {}: that changes the math, so the run would not continue as it began; "
                            "drop those flags (`tandem train --resume` takes the checkpoint's recorded ones for "
                            "flags not given), or pass --force to resume anyway",
                            path, refused));
  return diffs;
}

}  // namespace tandem::train::checkpoint
