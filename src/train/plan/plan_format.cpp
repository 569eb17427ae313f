// The memory plan as the table `tandem train` prints and as JSON for the metrics file.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tandem/train/memory_plan.h"
#include "train/place/param_stream.h"

namespace tandem::train {
namespace {

std::string size(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / (1u << 30));
  return fmt::format("{:.1f} MiB", b / (1u << 20));
}

nlohmann::json categories_json(const MemoryCategories& c) {
  return {{"parameters", c.parameters},
          {"gradients", c.gradients},
          {"optimizer_state", c.optimizer_state},
          {"activations", c.activations},
          {"workspace", c.workspace},
          {"batches", c.batches},
          {"total", c.total()}};
}

}  // namespace

int64_t host_state_bytes(const MemoryPlan& p) {
  return p.on_host.parameters + p.on_host.gradients + p.on_host.optimizer_state + p.host_pageable;
}

std::string format_memory_plan(const MemoryPlan& p) {
  const char* host_head = p.host_device ? "pinned" : "host (pinned)";
  std::string out = fmt::format(
      "memory plan ({} parameters{}):\n", p.num_parameters,
      p.recompute_blocks > 0 ? fmt::format(", {} blocks recompute", p.recompute_blocks) : "");
  // A streamed run's host optimizer state and offloaded activations: a pageable host column;
  // the disk tier's files (or a --max-host-gb cap): a disk column too.
  const bool disk_col = p.on_disk.total() > 0 || p.max_host > 0;
  const bool pageable = (p.host_pageable > 0 && !p.host_device) || disk_col;
  out += fmt::format("  {:<16} {:>12} {:>14}{}{}\n", "", p.host_device ? "host" : p.device, host_head,
                     pageable ? fmt::format(" {:>16}", "host (pageable)") : "",
                     disk_col ? fmt::format(" {:>12}", "disk") : "");
  const auto row = [&](const char* name, int64_t d, int64_t h, int64_t g, int64_t disk) {
    out += fmt::format("  {:<16} {:>12} {:>14}{}{}\n", name, size(d), size(h),
                       pageable ? fmt::format(" {:>16}", size(g)) : "",
                       disk_col ? fmt::format(" {:>12}", size(disk)) : "");
  };
  row("parameters", p.on_device.parameters, p.on_host.parameters, 0, p.on_disk.parameters);
  row("gradients", p.on_device.gradients, p.on_host.gradients, 0, p.on_disk.gradients);
  row("optimizer state", p.on_device.optimizer_state, p.on_host.optimizer_state, p.host_pageable - p.host_activations,
      p.on_disk.optimizer_state);
  row("activations", p.on_device.activations, p.on_host.activations, p.host_activations, 0);
  row("workspace", p.on_device.workspace, p.on_host.workspace, 0, 0);
  row("batches", p.on_device.batches, p.on_host.batches, 0, 0);
  row("total", p.on_device.total(), p.on_host.total(), p.host_pageable, p.on_disk.total());
  if (p.on_disk.total() > 0)
    out += fmt::format("  disk tier (--optimizer-state-device disk): master weights and moments in files under {} "
                       "({} free); a window of {} of them in pageable host memory\n",
                       p.offload_dir, p.disk_available >= 0 ? size(p.disk_available) : std::string("unknown"),
                       size(p.disk_window));
  if (!p.activations_note.empty()) {
    out += fmt::format("  activations not planned: {}\n", p.activations_note);
  } else {
    out += fmt::format(
        "  activations: training step {} (kept forward to backward {}), evaluation {}\n",
        size(p.activations_step), size(p.activations_kept), size(p.activations_eval));
  }
  if (p.streamed_blocks > 0)
    out += fmt::format(
        "  parameters at home on the host (--param-device cpu): {} blocks streamed through {} slots of {} on the "
        "device{}; optimizer state {} in pageable host memory{}{}\n",
        p.streamed_blocks, p.slots, size(p.slot_bytes),
        p.param_prefetch_auto ? fmt::format(" (--param-prefetch auto: {} ahead, {})",
                                            ParamStreamer::ahead_for(p.slots, p.param_prefetch),
                                            p.device_budget <= 0  ? "the default: no device budget is known"
                                            : device_fits(p) ? "the deepest the device budget fits"
                                                             : "none fits the device budget")
                              : std::string(),
        size(p.host_pageable - p.host_activations),
        p.on_disk.total() > 0 ? " (the disk tier's window of parts; the rest on disk)" : "",
        p.zero_shards > 1 ? fmt::format("; the host homes and state are this rank's 1/{} (--zero 3), with {} of "
                                        "pinned stages the parts are gathered into",
                                        p.zero_shards, size(p.stage_bytes))
                          : std::string());
  if (p.streamed_blocks > 0 && p.num_parameters > 0) {  // the host's state per trainable parameter
    // --zero 3: per parameter of this rank's share (its 1/N of every part)
    const double n = static_cast<double>(p.num_parameters) / static_cast<double>(std::max<int64_t>(1, p.zero_shards));
    out += fmt::format(
        "  host bytes per parameter{}: {:.2f} (values, copies and staging {:.2f}, gradients {:.2f} pinned; optimizer "
        "state {:.2f} pageable)\n",
        p.zero_shards > 1 ? " of this rank's share" : "", static_cast<double>(host_state_bytes(p)) / n,
        static_cast<double>(p.on_host.parameters) / n,
        static_cast<double>(p.on_host.gradients) / n, static_cast<double>(p.host_pageable) / n);
  }
  std::string limits;
  if (p.device_budget > 0)
    limits += fmt::format("device {} ({})", size(p.device_budget), p.device_budget_source);
  if (p.max_pinned > 0)
    limits += fmt::format("{}pinned {} (--max-pinned-gb)", limits.empty() ? "" : ", ",
                          size(p.max_pinned));
  if (p.max_host > 0)
    limits += fmt::format("{}host {} (--max-host-gb)", limits.empty() ? "" : ", ", size(p.max_host));
  if (p.host_available > 0)
    limits +=
        fmt::format("{}host {} (MemAvailable)", limits.empty() ? "" : ", ", size(p.host_available));
  if (!limits.empty()) out += "  limits: " + limits + "\n";
  return out;
}

std::string memory_plan_json(const MemoryPlan& p) {
  nlohmann::json j = {{"device", p.device},
                      {"on_device", categories_json(p.on_device)},
                      {"on_host_pinned", categories_json(p.on_host)},
                      {"num_parameters", p.num_parameters},
                      {"activations_step", p.activations_step},
                      {"activations_kept", p.activations_kept},
                      {"activations_eval", p.activations_eval},
                      {"recompute_blocks", p.recompute_blocks},
                      {"host_pageable", p.host_pageable},
                      {"host_activations", p.host_activations},
                      {"streamed_blocks", p.streamed_blocks},
                      {"slot_bytes", p.slot_bytes},
                      {"host_state_bytes", host_state_bytes(p)},
                      {"device_budget", p.device_budget},
                      {"device_budget_source", p.device_budget_source},
                      {"max_pinned", p.max_pinned}};
  if (p.on_disk.total() > 0 || p.max_host > 0) {
    j["on_disk"] = categories_json(p.on_disk);
    j["disk_window"] = p.disk_window;
    j["max_host"] = p.max_host;
  }
  if (!p.activations_note.empty()) j["activations_note"] = p.activations_note;
  return j.dump();
}

}  // namespace tandem::train
