#include "train/split/split_setup.h"

#include <algorithm>

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/stream.h"
#include "tandem/thread_pool.h"

namespace tandem::train {

SplitPlan prepare_split(const TrainConfig& cfg) {
  SplitPlan plan = parse_split(cfg.devices, cfg.split, cfg.batch_size);
  for (const DeviceSpec& spec : plan.devices) {
    try {
      configure_device(spec);
      if (!spec.device.is_host()) runtime_for(spec.device);
    } catch (const Error& e) {
      std::string what = e.what();
      if (!what.empty() && what[0] == '[') what.erase(0, what.find("] ") + 2);
      throw_error(e.code(), "train", fmt::format("--devices {}: {}: {}", cfg.devices, spec.device.str(), what));
    }
  }
  return plan;
}

std::string split_planning(const SplitPlan& plan) {
  std::string note;
  size_t computing = 0;
  for (const DeviceSpec& s : plan.devices) {
    const std::string n = planning_note(s.device);
    if (n.empty()) {
      ++computing;
    } else if (note.empty()) {
      note = n;
    }
  }
  TD_CHECK_ARG(computing == 0 || computing == plan.devices.size(), "train",
               "--devices: some devices compute and others do not ({}); expected all or none with compute=none", note);
  return note;
}

int compute_threads(const TrainConfig& cfg, const SplitPlan* plan) {
  if (cfg.threads > 0) return cfg.threads;
  const int cores = available_cores();
  const bool cpu_device =
      plan && std::any_of(plan->devices.begin(), plan->devices.end(), [](const DeviceSpec& s) { return s.device.is_host(); });
  if (!cpu_device) return cores;
  return std::max(1, cores - std::max(0, cfg.num_workers));
}

}  // namespace tandem::train
