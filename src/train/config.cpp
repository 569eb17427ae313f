#include "tandem/train/config.h"
#include "tandem/train/memory_plan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <climits>
#include <filesystem>
#include <utility>

#include "tandem/error.h"
#include "train/dist/grad_compression.h"

namespace tandem::train {

// --save and --trace are written after training (to a temporary file, then renamed over the
// path): refuse a path that cannot be written now, before the run. An existing path must be a
// regular file: the rename would replace a device node or FIFO (e.g. /dev/null as root) with a
// regular file instead of writing to it.
static void check_output_path(const char* flag, const std::string& path) {
  const char* op = "train";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    TD_CHECK_ARG(!S_ISDIR(st.st_mode), op, "{} {}: expected a file path, found a directory", flag, path);
    TD_CHECK_ARG(S_ISREG(st.st_mode), op, "{} {}: expected a regular file path, found a device, FIFO or socket",
                 flag, path);
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  const std::string parent = dir.empty() ? std::string(".") : dir.string();
  TD_CHECK_ARG(::stat(parent.c_str(), &st) == 0, op, "{} {}: expected an existing folder {}, found none ({})", flag,
               path, parent, std::strerror(errno));
  TD_CHECK_ARG(S_ISDIR(st.st_mode), op, "{} {}: expected {} to be a folder, found a file", flag, path, parent);
  TD_CHECK_ARG(::access(parent.c_str(), W_OK) == 0, op, "{} {}: expected a writable folder {}, found: {}", flag, path,
               parent, std::strerror(errno));
  // access() passes for root where no file can be made (/proc, /sys): make and drop a probe.
  const std::string probe = parent + "/.tandem-probe-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  TD_CHECK_ARG(fd >= 0, op, "{} {}: expected a folder where files can be made, could not make one in {} ({})",
               flag, path, parent, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  // The temporary file's name is the file name plus ".tmp-<pid>" (up to 16 characters).
  const std::string name = std::filesystem::path(path).filename().string();
  const long name_max = ::pathconf(parent.c_str(), _PC_NAME_MAX);
  const size_t limit = name_max > 16 ? static_cast<size_t>(name_max) - 16 : 255 - 16;
  TD_CHECK_ARG(name.size() <= limit && path.size() + 16 < PATH_MAX, op,
               "{}: expected a file name of at most {} characters and a path shorter than {}, got a {}-character "
               "name in a {}-character path",
               flag, limit, PATH_MAX - 16, name.size(), path.size());
}

// The same file under two spellings ("w.st" and "./w.st"): the folder resolved, the name as is.
static bool same_file(const std::string& a, const std::string& b) {
  std::error_code ea, eb;
  const auto ca = std::filesystem::weakly_canonical(std::filesystem::absolute(a), ea);
  const auto cb = std::filesystem::weakly_canonical(std::filesystem::absolute(b), eb);
  return ea || eb ? a == b : ca == cb;
}

// The data flags: names, the split fraction, the image sizes and the normalization.
static void validate_data(const TrainConfig& c, const char* op) {
  const std::string& f = c.dataset;
  TD_CHECK_ARG(f == "auto" || f == "fashion-mnist" || f == "cifar10" || f == "cifar100" || f == "folder" ||
                   f == "packed",
               op, "--dataset: expected auto, fashion-mnist, cifar10, cifar100, folder or packed, got {}", f);
  TD_CHECK_ARG(c.shuffle == "full" || c.shuffle == "block", op, "--shuffle: expected full or block, got {}",
               c.shuffle);
  TD_CHECK_ARG(c.label == "fine" || c.label == "coarse", op, "--label: expected fine or coarse, got {}", c.label);
  TD_CHECK_ARG(c.val_split == 0 || (c.val_split > 0 && c.val_split < 1), op,
               "--val-split: expected a fraction in (0, 1), got {}", c.val_split);
  TD_CHECK_ARG(c.image_size >= 0 && c.image_size <= 4096, op,
               "--image-size: expected 0 (the dataset's) or 1..4096 pixels, got {}", c.image_size);
  TD_CHECK_ARG(c.resize_size >= 0 && c.resize_size <= 8192, op,
               "--resize-size: expected 0 (image size * 256 / 224) or 1..8192 pixels, got {}", c.resize_size);
  TD_CHECK_ARG(c.resize_size == 0 || c.image_size == 0 || c.resize_size >= c.image_size, op,
               "--resize-size {}: expected at least --image-size {} (the center crop is taken from it)",
               c.resize_size, c.image_size);
  TD_CHECK_ARG(c.mean.empty() || c.mean.size() == 1 || c.mean.size() == 3, op,
               "--mean: expected 1 or 3 values (one per channel), got {}", c.mean.size());
  for (const double m : c.mean) TD_CHECK_ARG(std::isfinite(m), op, "--mean: expected finite values, got {}", m);
  for (const double s : c.std)
    TD_CHECK_ARG(std::isfinite(s) && s > 0, op, "--std: expected finite values > 0, got {}", s);
  TD_CHECK_ARG(c.std.empty() == c.mean.empty(), op, "{} given without {}: expected both (or neither, for the "
               "dataset's own)", c.mean.empty() ? "--std" : "--mean", c.mean.empty() ? "--mean" : "--std");
  TD_CHECK_ARG(c.std.size() == c.mean.size(), op, "--std: expected as many values as --mean ({}), got {}",
               c.mean.size(), c.std.size());
}

TrainConfig with_implied_flags(TrainConfig c) {
  if (c.param_device == "cpu" && c.optimizer_device == "cpu") c.optimizer_device = "device";
  return c;
}

void validate(const TrainConfig& c, const char* command) {
  const char* op = command;
  validate_data(c, op);
  const bool eval = std::strcmp(command, "eval") == 0;
  const bool scaled = c.loss_scale == "dynamic" || (c.loss_scale == "auto" && c.precision == "fp16");  // a LossScaler
  TD_CHECK_ARG(c.epochs >= 1, op, "--epochs: expected an integer >= 1, got {}", c.epochs);
  TD_CHECK_ARG(c.batch_size >= 1, op, "--batch-size: expected an integer >= 1, got {}", c.batch_size);
  TD_CHECK_ARG(c.eval_batch_size >= 1, op, "{}: expected an integer >= 1, got {}",
               eval ? "--batch-size" : "--eval-batch-size", c.eval_batch_size);
  TD_CHECK_ARG(std::isfinite(c.lr) && c.lr > 0, op, "--lr: expected a finite value > 0, got {}", c.lr);
  TD_CHECK_ARG(std::isfinite(c.weight_decay) && c.weight_decay >= 0, op,
               "--weight-decay: expected a finite value >= 0, got {}", c.weight_decay);
  TD_CHECK_ARG(c.momentum >= 0 && c.momentum < 1, op, "--momentum: expected a value in [0, 1), got {}", c.momentum);
  TD_CHECK_ARG(c.beta1 >= 0 && c.beta1 < 1, op, "--beta1: expected a value in [0, 1), got {}", c.beta1);
  TD_CHECK_ARG(c.beta2 >= 0 && c.beta2 < 1, op, "--beta2: expected a value in [0, 1), got {}", c.beta2);
  TD_CHECK_ARG(std::isfinite(c.eps) && c.eps > 0, op, "--eps: expected a finite value > 0, got {}", c.eps);
  TD_CHECK_ARG(c.warmup_epochs >= 0 && (c.max_steps > 0 || c.warmup_epochs <= c.epochs), op,
               "--warmup-epochs: expected a value in [0, --epochs], got {}", c.warmup_epochs);
  TD_CHECK_ARG(c.warmup_steps >= -1, op, "--warmup-steps: expected an integer >= 0 (optimizer steps), got {}",
               c.warmup_steps);
  TD_CHECK_ARG(c.pct_start > 0 && c.pct_start < 1, op, "--pct-start: expected a value in (0, 1), got {}",
               c.pct_start);
  TD_CHECK_ARG(!c.no_decay_bn_bias || c.optimizer_device != "cpu", op,
               "--no-decay-bn-bias: expected --optimizer-device device (the offloaded optimizer decays every "
               "parameter alike)");
  TD_CHECK_ARG(c.init_exclude.empty() || !c.init.empty(), op, "--init-exclude {}: expected --init FILE too",
               c.init_exclude.empty() ? "" : c.init_exclude.front());
  TD_CHECK_ARG(c.init.empty() || std::filesystem::is_regular_file(c.init), op,
               "--init {}: expected an existing safetensors file", c.init);
  for (const auto& [flag, v] :
       {std::pair{"--n-layer", c.n_layer}, std::pair{"--n-head", c.n_head},
        std::pair{"--n-embd", c.n_embd}, std::pair{"--block-size", c.block_size}})
    TD_CHECK_ARG(v >= 0 && v <= (int64_t{1} << 24), op,
                 "{}: expected 0 (the model's) or 1..16777216, got {}", flag, v);
  TD_CHECK_ARG(c.max_steps >= 0, op,
               "--max-steps: expected an integer >= 0 (0 = run --epochs), got {}", c.max_steps);
  TD_CHECK_ARG(c.eval_interval >= 0, op,
               "--eval-interval: expected an integer >= 0 (steps; 0 = at epoch ends only), got {}",
               c.eval_interval);
  TD_CHECK_ARG(c.grad_accum_steps >= 1 && c.grad_accum_steps <= 65536, op,
               "--grad-accum-steps: expected an integer in 1..65536 (micro-batches per optimizer "
               "step), got {}",
               c.grad_accum_steps);
  TD_CHECK_ARG(c.step_size_epochs >= 1, op, "--step-size: expected an integer >= 1, got {}", c.step_size_epochs);
  TD_CHECK_ARG(c.recompute == "none" || c.recompute == "blocks", op,
               "--recompute: expected none or blocks, got {}", c.recompute);
  TD_CHECK_ARG(c.activations_device == "device" || c.activations_device == "cpu", op,
               "--activations-device: expected device or cpu, got {}", c.activations_device);
  TD_CHECK_ARG(c.activations_device == "device" || c.recompute == "blocks", op,
               "--activations-device cpu: expected --recompute blocks too (the kept block inputs are what moves)");
  TD_CHECK_ARG(c.param_device == "device" || c.param_device == "cpu", op,
               "--param-device: expected device or cpu, got {}", c.param_device);
  TD_CHECK_ARG(c.param_prefetch == -1 || (c.param_prefetch >= 1 && c.param_prefetch <= 8), op,
               "--param-prefetch {}: expected 1 to 8 blocks or auto", c.param_prefetch);
  TD_CHECK_ARG(c.param_prefetch == 1 || c.param_device == "cpu", op,
               "--param-prefetch {}: expected --param-device cpu (only streamed blocks are uploaded ahead)",
               c.param_prefetch);
  TD_CHECK_ARG(c.optimizer_split > 0 && c.optimizer_split <= 1, op,
               "--optimizer-split {}: expected the host's share of the update, in (0, 1]", c.optimizer_split);
  if (c.optimizer_split != 1) {  // the device's parts are updated beside the host's per-part updates
    TD_CHECK_ARG(c.param_device == "cpu", op, "--optimizer-split {}: expected --param-device cpu (it splits the "
                 "streamed parameters' update between the host and the device)", c.optimizer_split);
    const char* conflict = c.offload_delay != 0         ? "--offload-delay 1 (the device's parts would run one update ahead)"
                           : c.clip_grad_norm != 0        ? "--clip-grad-norm (it needs every gradient on one side)"
                           : c.optimizer_moments != "fp32" ? "--optimizer-moments bf16 (host moments only)"
                                                           : nullptr;
    TD_CHECK_ARG(conflict == nullptr, op, "--optimizer-split {}: not with {}", c.optimizer_split,
                 conflict ? conflict : "");
  }
  TD_CHECK_ARG(std::isfinite(c.max_pinned_gb) && c.max_pinned_gb >= 0, op,
               "--max-pinned-gb: expected a finite value >= 0 (GiB; 0 = no cap), got {}",
               c.max_pinned_gb);
  if (!c.device_memory_budget.empty())
    parse_byte_size(c.device_memory_budget, "--device-memory-budget");
  TD_CHECK_ARG(c.gamma > 0 && c.gamma <= 1, op, "--gamma: expected a value in (0, 1], got {}", c.gamma);
  TD_CHECK_ARG(c.online_mix >= 0 && c.online_mix < 1, op, "--online-mix: expected a fraction in [0, 1), got {}",
               c.online_mix);
  TD_CHECK_ARG(c.label_smoothing >= 0 && c.label_smoothing < 1, op,
               "--label-smoothing: expected a value in [0, 1), got {}", c.label_smoothing);
  TD_CHECK_ARG(c.num_workers >= -1 && c.num_workers <= 256, op, "--num-workers: expected 0..256 or auto, got {}",
               c.num_workers);
  TD_CHECK_ARG(c.prefetch_factor == -1 || (c.prefetch_factor >= 1 && c.prefetch_factor <= 64), op,
               "--prefetch/--prefetch-factor: expected 1..64 or auto, got {}", c.prefetch_factor);
  TD_CHECK_ARG(c.progress >= -1 && c.progress <= 1, op, "--progress: expected 1 (on), 0 (off) or -1 (on a terminal), got {}",
               c.progress);
  TD_CHECK_ARG(c.log_interval >= 1, op, "--log-interval: expected at least 1 step, got {}", c.log_interval);
  TD_CHECK_ARG(c.threads >= 0 && c.threads <= 1024, op, "--threads: expected 0 (all cores) or 1..1024, got {}",
               c.threads);
  TD_CHECK_ARG(c.split == "auto" || !c.devices.empty(), op,
               "--split {}: expected --devices with it (the devices the batch is split between)", c.split);
  TD_CHECK_ARG(c.optimizer_device == "device" || c.optimizer_device == "cpu", op,
               "--optimizer-device: expected device or cpu, got {}", c.optimizer_device);
  TD_CHECK_ARG(std::isfinite(c.bucket_cap_mb) && c.bucket_cap_mb > 0, op,
               "--bucket-cap-mb: expected a value > 0 (MiB), got {}", c.bucket_cap_mb);
  TD_CHECK_ARG(std::isfinite(c.dist_timeout) && c.dist_timeout > 0, op,
               "--dist-timeout: expected seconds > 0, got {}", c.dist_timeout);
  TD_CHECK_ARG(c.bind == "auto" || c.bind == "none" || c.bind == "cores" || c.bind == "numa", op,
               "--bind {}: expected none, cores, numa or auto", c.bind);
  check_grad_compression(c.grad_compression);
  TD_CHECK_ARG(c.zero == 0 || c.zero == 1 || c.zero == 3, op, "--zero: expected 0, 1 or 3, got {}", c.zero);
  if (c.zero == 3) {  // ZeRO-3 over the streamed parameters' host homes
    TD_CHECK_ARG(c.param_device == "cpu", op,
                 "--zero 3: expected --param-device cpu (stage 3 shards the host homes of streamed parameters)");
    const char* conflict = c.optimizer_split != 1 ? "--optimizer-split (the device's parts are not sharded)"
                           : c.offload_delay != 0 && !(c.checkpoint_dir.empty() && c.resume.empty())
                               ? "--offload-delay 1 and --checkpoint-dir/--resume yet (a pending delayed update's "
                                 "upload copies are sharded, and gathering them into a checkpoint is not written)"
                           : c.offload_delay != 0 && c.clip_grad_norm != 0
                               ? "--offload-delay 1 and --clip-grad-norm yet (the shards' clipped updates run after "
                                 "the backward, and they are not delayed)"
                           : c.offload_delay != 0 && scaled
                               ? "--offload-delay 1 and dynamic loss scaling yet (the shards' checked updates run "
                                 "after the backward, and they are not delayed)"
                           : c.grad_compression.rfind("topk", 0) == 0
                               ? "--grad-compression topk (its error feedback keeps a residual of each rank's whole "
                                 "gradients, the model's size on every rank, which ZeRO-3 exists not to hold)"
                               : nullptr;
    TD_CHECK_ARG(conflict == nullptr, op, "--zero 3: not supported with {}", conflict ? conflict : "");
  }
  TD_CHECK_ARG(c.zero == 0 || c.optimizer_device == "device" || c.grad_compression == "none", op,
               "--zero 1 --optimizer-device cpu --grad-compression {}: expected --grad-compression none (the "
               "offloaded ZeRO-1 reduce-scatters the gradients uncompressed)",
               c.grad_compression);
  TD_CHECK_ARG(c.zero == 0 || c.optimizer_device == "device" || c.checkpoint_dir.empty() || sharded_checkpoints(c), op,
               "--zero 1 --optimizer-device cpu with --checkpoint-dir and --checkpoint-format whole: not supported "
               "(each rank's CPU optimizer holds 1/N of the state); expected --checkpoint-format sharded or auto");
  TD_CHECK_ARG(c.zero == 0 || c.optimizer_device == "device" ||
                   (c.loss_scale != "dynamic" && (c.loss_scale != "auto" || c.precision != "fp16")),
               op,
               "--zero {} --optimizer-device cpu with dynamic loss scaling (--precision fp16 or --loss-scale "
               "dynamic): not supported (the offloaded ZeRO-1 updates each rank's blocks before any rank holds the "
               "step's verdict, and bf16 or fp16 transfers are not sharded either); expected --zero 0, --optimizer-"
               "device device, or --precision fp32 without --loss-scale dynamic",
               c.zero);
  TD_CHECK_ARG(c.optimizer_moments == "fp32" || c.optimizer_moments == "bf16", op,
               "--optimizer-moments: expected fp32 or bf16, got {}", c.optimizer_moments);
  if (c.optimizer_moments == "bf16") {
    TD_CHECK_ARG(c.optimizer == "adam" || c.optimizer == "adamw", op,
                 "--optimizer-moments bf16: expected --optimizer adam or adamw, got {}", c.optimizer);
    TD_CHECK_ARG(c.zero == 0 || c.optimizer_device == "device", op,
                 "--optimizer-moments bf16 with --zero 1 --optimizer-device cpu: not supported yet (the offloaded "
                 "ZeRO-1's blocks cut parameters, and the moments' rounding noise follows each parameter's "
                 "elements); expected --optimizer-device device or --optimizer-moments fp32");
    TD_CHECK_ARG(c.device.rfind("cuda", 0) != 0 || c.param_device == "cpu" || c.optimizer_device == "cpu", op,
                 "--optimizer-moments bf16 on {}: the bf16 moments are updated by host kernels; expected "
                 "--param-device cpu or --optimizer-device cpu (the host optimizer) or a cpu/virt --device",
                 c.device);
  }
  TD_CHECK_ARG(c.offload_delay == 0 || c.offload_delay == 1, op, "--offload-delay: expected 0 or 1, got {}",
               c.offload_delay);
  TD_CHECK_ARG(c.offload_delay == 0 || c.optimizer_device == "cpu" || c.param_device == "cpu", op,
               "--offload-delay 1: expected --optimizer-device cpu or --param-device cpu, got --optimizer-device {}",
               c.optimizer_device);
  TD_CHECK_ARG(c.offload_delay_warmup >= 0, op, "--offload-delay-warmup: expected an integer >= 0 (steps), got {}",
               c.offload_delay_warmup);
  TD_CHECK_ARG(
      c.offload_delay_warmup == 0 || c.optimizer_device == "cpu" || c.param_device == "cpu", op,
      "--offload-delay-warmup {}: expected --optimizer-device cpu or --param-device cpu, got --optimizer-device {}",
      c.offload_delay_warmup, c.optimizer_device);
  TD_CHECK_ARG(c.offload_delay_warmup == 0 || c.offload_delay == 1, op,
               "--offload-delay-warmup {}: expected --offload-delay 1 with it (the steps before the delay starts)",
               c.offload_delay_warmup);
  TD_CHECK_ARG(c.simd.empty() || c.simd == "scalar" || c.simd == "avx2" || c.simd == "avx512", op,
               "--simd: expected scalar, avx2 or avx512, got {}", c.simd);
  TD_CHECK_ARG(c.precision == "fp32" || c.precision == "bf16" || c.precision == "fp16", op,
               "--precision: expected fp32, bf16 or fp16, got {}", c.precision);
  TD_CHECK_ARG(c.save_dtype == "fp32" || c.save_dtype == "bf16", op, "--save-dtype: expected fp32 or bf16, got {}",
               c.save_dtype);
  TD_CHECK_ARG(std::isfinite(c.clip_grad_norm) && c.clip_grad_norm >= 0, op,
               "--clip-grad-norm: expected a value >= 0 (0 = off), got {}", c.clip_grad_norm);
  TD_CHECK_ARG(c.precision == "fp32" || c.optimizer_device == "device" || c.zero == 0, op,
               "--precision {} with --optimizer-device cpu and --zero 1: low-precision transfers are not sharded; "
               "expected --zero 0 or --precision fp32",
               c.precision);
  TD_CHECK_ARG(c.precision == "fp32" || c.optimizer_device == "device" || c.offload_delay == 0 ||
                   (c.checkpoint_dir.empty() && c.resume.empty()),
               op,
               "--precision {} with --offload-delay 1 and --checkpoint-dir/--resume: not supported (a checkpoint "
               "taken while an upload is pending would need the device's f32 weights, which stay behind in low "
               "precision); expected --offload-delay 0 or --precision fp32",
               c.precision);
  TD_CHECK_ARG(c.loss_scale == "auto" || c.loss_scale == "dynamic" || c.loss_scale == "none", op,
               "--loss-scale: expected auto, dynamic or none, got {}", c.loss_scale);
  TD_CHECK_ARG(std::isfinite(c.loss_scale_init) && c.loss_scale_init >= 1 && c.loss_scale_init <= 1e38, op,
               "--loss-scale-init {}: expected a scale in [1, 1e38] (the scaler's floor is 1; its state is f32)",
               c.loss_scale_init);
  TD_CHECK_ARG(c.loss_scale_init == 65536.0 || scaled, op,
               "--loss-scale-init {}: expected dynamic loss scaling with it (--precision fp16, or --loss-scale "
               "dynamic)",
               c.loss_scale_init);
  TD_CHECK_ARG((c.loss_scale != "dynamic" && c.clip_grad_norm == 0 && (c.loss_scale != "auto" || c.precision != "fp16")) ||
                   c.optimizer_device == "device" || c.zero == 0,
               op,
               "--loss-scale and --clip-grad-norm with --optimizer-device cpu and --zero 1: not supported (the "
               "host checks the gradients after its updates, and each rank updates its blocks from gradients no "
               "rank holds whole); use --zero 0 or --optimizer-device device");
  validate_checkpoint_flags(c, op);
  validate_disk_flags(c, op);
  if (!c.save.empty()) check_output_path("--save", c.save);
  if (!c.trace.empty()) check_output_path("--trace", c.trace);
  if (!c.metrics_file.empty()) check_output_path("--metrics-file", c.metrics_file);
  for (const auto& [flag, other] : {std::pair{"--save", &c.save}, std::pair{"--trace", &c.trace}})
    TD_CHECK_ARG(c.metrics_file.empty() || other->empty() || !same_file(c.metrics_file, *other), op,
                 "--metrics-file {}: expected a different file from {} {}", c.metrics_file, flag, *other);
  TD_CHECK_ARG(c.tensorboard.empty() || !std::filesystem::exists(c.tensorboard) ||
                   std::filesystem::is_directory(c.tensorboard),
               op, "--tensorboard {}: expected a folder (made when missing), found a file", c.tensorboard);
  TD_CHECK_ARG(c.save.empty() || c.trace.empty() || !same_file(c.save, c.trace), op,
               "--trace {}: expected a different file from --save {}", c.trace, c.save);
}

}  // namespace tandem::train
