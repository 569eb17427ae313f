// validate_disk_flags (tandem/train/config.h): the disk tier's flags.
#include <cmath>
#include <string>
#include <utility>

#include "tandem/error.h"
#include "tandem/storage/disk_store.h"
#include "tandem/train/config.h"

namespace tandem::train {

std::pair<double, double> parse_disk_gbps(const std::string& text) {
  if (text.empty()) return {0, 0};
  const size_t comma = text.find(',');
  double v[2] = {0, 0};
  const std::string parts[2] = {text.substr(0, comma), comma == std::string::npos ? text.substr(0, comma)
                                                                                  : text.substr(comma + 1)};
  for (int i = 0; i < 2; ++i) {
    size_t used = 0;
    try {
      v[i] = std::stod(parts[i], &used);
    } catch (const std::exception&) {
      used = 0;
    }
    TD_CHECK_ARG(used == parts[i].size() && used > 0 && std::isfinite(v[i]) && v[i] > 0, "train",
                 "--disk-gbps {}: expected READ[,WRITE] in GB/s, each > 0 (e.g. 12,10)", text);
  }
  return {v[0], v[1]};
}

void validate_disk_flags(const TrainConfig& c, const char* op) {
  parse_disk_gbps(c.disk_gbps);
  TD_CHECK_ARG(c.disk_gbps.empty() || c.optimizer_state_device == "disk", op,
               "--disk-gbps {}: expected --optimizer-state-device disk (it models that drive)", c.disk_gbps);
  TD_CHECK_ARG(c.optimizer_state_device == "host" || c.optimizer_state_device == "disk", op,
               "--optimizer-state-device: expected host or disk, got {}", c.optimizer_state_device);
  TD_CHECK_ARG(std::isfinite(c.max_host_gb) && c.max_host_gb >= 0, op,
               "--max-host-gb: expected a finite value >= 0 (GiB; 0 = no cap), got {}", c.max_host_gb);
  if (c.optimizer_state_device == "host") {
    TD_CHECK_ARG(c.offload_dir.empty(), op, "--offload-dir {}: expected --optimizer-state-device disk with it",
                 c.offload_dir);
    return;
  }
  TD_CHECK_ARG(c.optimizer_device == "cpu" || c.param_device == "cpu", op,
               "--optimizer-state-device disk: expected --optimizer-device cpu or --param-device cpu (the disk tier "
               "holds the host optimizer's master weights and moments)");
  TD_CHECK_ARG(c.param_device != "cpu" || c.zero != 3, op,
               "--param-device cpu --optimizer-state-device disk with --zero 3: not supported yet (the disk tier keeps "
               "each part whole, ZeRO-3 a shard of each); expected --zero 0");
  TD_CHECK_ARG(!c.offload_dir.empty(), op, "--optimizer-state-device disk: expected --offload-dir DIR");
  TD_CHECK_ARG(c.offload_delay == 0, op,
               "--optimizer-state-device disk with --offload-delay 1: not supported (a delayed upload reads the "
               "master copy after the bucket went back to disk); expected --offload-delay 0");
  TD_CHECK_ARG(c.clip_grad_norm == 0 && c.loss_scale != "dynamic" && (c.loss_scale != "auto" || c.precision != "fp16"),
               op,
               "--optimizer-state-device disk with --clip-grad-norm or dynamic loss scaling: not supported yet (the "
               "checks' rollback rewrites buckets already written back to disk); expected --optimizer-state-device "
               "host");
  TD_CHECK_ARG(c.zero != 1, op,
               "--optimizer-state-device disk with --zero 1: not supported (the disk tier keeps whole buckets); "
               "expected --zero 0");
  storage::check_offload_dir(c.offload_dir, 0);
}

}  // namespace tandem::train
