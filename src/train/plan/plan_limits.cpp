// The limits a memory plan is checked against and the one-line refusal of a run that does not
// fit (tandem/train/memory_plan.h).
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tandem/device_traits.h"
#include "tandem/error.h"
#include "tandem/train/memory_plan.h"

namespace tandem::train {
namespace {

// MemAvailable of /proc/meminfo in bytes; 0 when it cannot be read.
int64_t mem_available() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

// GiB from 1 GiB up, else MiB, one decimal.
std::string size(int64_t bytes, bool mib = false) {
  const double b = static_cast<double>(bytes);
  if (!mib && bytes >= (int64_t{1} << 30)) return fmt::format("{:.1f} GiB", b / (1u << 30));
  return fmt::format("{:.1f} MiB", b / (1u << 20));
}

// "needs 34.2 GiB of device memory, 21.8 GiB <tail>"; in MiB where GiB would show two equal
// figures.
std::string needs(int64_t need, int64_t have, const char* what, const std::string& tail) {
  const bool mib = size(need) == size(have);
  return fmt::format("needs {} of {}, {} {}", size(need, mib), what, size(have, mib), tail);
}

// The caching pools (a device's, the pinned one) reserve whole segments of at least 2 MiB
// (small requests share one; large ones are rounded up to 2 MiB), so what they reserve is at
// least the plan's bytes rounded up to 2 MiB: a limit below that cannot hold the run.
constexpr int64_t kSegment = int64_t{2} << 20;
int64_t in_segments(int64_t bytes) { return bytes <= 0 ? 0 : (bytes + kSegment - 1) / kSegment * kSegment; }

// "try A or B or C", or, when no flag shrinks the run, that this is the limit of the machine.
std::string advice(const std::vector<std::string>& knobs) {
  if (knobs.empty()) return "no flag makes this run smaller: the model needs a larger memory than this one";
  std::string s = "try " + knobs.front();
  for (size_t i = 1; i < knobs.size(); ++i) s += " or " + knobs[i];
  return s;
}

// --max-host-gb over the pinned and pageable host memory (a cpu run's device memory counted
// too; a virt device's arena is its device memory, counted against MemAvailable), and the disk tier's files against the folder's free space; the
// refusal gives the figures of every tier.
void check_host_and_disk(const MemoryPlan& p, int64_t device) {
  const int64_t host = p.host_total() + (p.host_device ? device : 0);
  const int64_t disk = p.on_disk.total();
  const std::string tiers = fmt::format("device {}, pinned host {}, pageable host {}, disk {}", size(device),
                                        size(p.pinned()), size(p.host_pageable), size(disk));
  if (p.max_host > 0 && host > p.max_host) {
    std::string hint;
    if (p.on_host.optimizer_state > 0)  // the host master home keeps its state pinned
      hint = fmt::format("; the optimizer's moments ({}) and master weights can go to disk: "
                         "--optimizer-state-device disk --offload-dir DIR",
                         size(p.on_host.optimizer_state));
    else if (p.streamed_blocks > 0 && p.host_pageable > 0 && disk == 0)  // the streamed home's state, pageable
      hint = "; the streamed parts' master values and optimizer state can go to disk: --optimizer-state-device disk "
             "--offload-dir DIR";
    else if (disk > 0)
      hint = "; the rest (gradients, compute copies, batches, the disk tier's window) stays on the host: try a "
             "smaller --bucket-cap-mb or --batch-size";
    throw_error(ErrorCode::out_of_memory, "train",
                needs(host, p.max_host, "host memory", fmt::format("allowed (--max-host-gb); {}{}", tiers, hint)));
  }
  if (disk > 0 && p.disk_available >= 0 && disk > p.disk_available)
    throw_error(ErrorCode::out_of_memory, "train",
                needs(disk, p.disk_available, "disk",
                      fmt::format("free in --offload-dir {}; {}", p.offload_dir, tiers)));
}

}  // namespace

void apply_limits(MemoryPlan& plan, const PlanInputs& in) {
  if (in.device_memory_budget > 0) {
    plan.device_budget = in.device_memory_budget;
    plan.device_budget_source = "--device-memory-budget";
  } else if (!in.device.is_host()) {
    const DeviceMemoryLimit m = device_memory_limit(in.device);
    if (m.capped) {
      plan.device_budget = static_cast<int64_t>(m.available_bytes);
      plan.device_budget_source = m.source;
    }
  }
  plan.max_pinned = in.max_pinned_bytes;
  plan.max_host = in.max_host_bytes;
  plan.host_available = mem_available();
}

bool device_fits(const MemoryPlan& p) {
  const int64_t device = p.on_device.total();
  return p.device_budget <= 0 || (p.host_device ? device : in_segments(device)) <= p.device_budget;
}

void check_memory_plan(const MemoryPlan& p) {
  // Pooled memory is compared in the pools' whole segments (in_segments).
  const int64_t device = p.on_device.total();
  const int64_t device_reserve = p.host_device ? device : in_segments(device);
  if (p.device_budget > 0 && device_reserve > p.device_budget) {
    std::vector<std::string> knobs;  // only those that shrink what this run holds
    if (p.batch_size > 1) knobs.push_back("a smaller --batch-size");
    if (p.recompute_blocks == 0 && p.recomputable_blocks > 0) knobs.push_back("--recompute blocks");
    if (p.on_device.optimizer_state > 0)  // a streamed run's device parts go back to the host by the split
      knobs.push_back(p.streamed_blocks > 0 ? "--optimizer-split 1" : "--optimizer-device cpu");
    if (p.streamed_blocks == 0 && p.streamable)  // the streamed blocks' optimizer is the host's already
      knobs.push_back(p.on_host.optimizer_state > 0 ? "--param-device cpu in place of --optimizer-device cpu"
                                                    : "--param-device cpu");
    if (p.activations_eval > p.activations_step) knobs.push_back("a smaller --eval-batch-size (it sets the activations)");
    const std::string hint = advice(knobs);
    throw_error(ErrorCode::out_of_memory, "train",
                needs(device > p.device_budget ? device : device_reserve, p.device_budget,
                      p.host_device                ? "host memory"
                      : device > p.device_budget ? "device memory"
                                                 : "device memory in the pool's whole 2 MiB segments",
                      fmt::format("available ({}); {}", p.device_budget_source, hint)));
  }
  const int64_t pinned_reserve = in_segments(p.pinned());
  if (p.max_pinned > 0 && pinned_reserve > p.max_pinned) {
    std::string hint = "try a smaller --batch-size, --num-workers or --prefetch-factor";
    if (p.on_host.optimizer_state > 0) hint += ", or --optimizer-device device";
    if (p.streamed_blocks > 0)  // the parameters' homes dominate
      hint = fmt::format("the parameters' homes (--param-device cpu) take {:.1f} MiB of it: raise --max-pinned-gb "
                         "or use --param-device device",
                         static_cast<double>(p.on_host.parameters + p.on_host.gradients) / (1 << 20));
    throw_error(ErrorCode::out_of_memory, "train",
                needs(p.pinned() > p.max_pinned ? p.pinned() : pinned_reserve, p.max_pinned,
                      p.pinned() > p.max_pinned ? "pinned host memory"
                                                : "pinned host memory in the pool's whole 2 MiB segments",
                      "allowed (--max-pinned-gb); " + hint));
  }
  check_host_and_disk(p, device);
  const int64_t host = p.pinned() + p.host_pageable + (p.host_device || p.device_in_host_ram ? device : 0);
  if (p.host_available > 0 && host > p.host_available) {
    std::vector<std::string> knobs;
    if (p.batch_size > 1) knobs.push_back("a smaller --batch-size");
    if (p.device_in_host_ram && p.recompute_blocks == 0 && p.recomputable_blocks > 0)
      knobs.push_back("--recompute blocks");
    if (p.on_host.optimizer_state > 0) knobs.push_back("--optimizer-device device");
    if (p.host_moments_fp32) knobs.push_back("--optimizer-moments bf16 (half the moments' bytes)");
    const std::string hint = advice(knobs);
    // A virt device's arena is host memory: its share is named.
    const std::string what = p.host_device || !p.device_in_host_ram
                                 ? std::string("host memory")
                                 : fmt::format("host memory ({} of it {}'s)", size(device), p.device);
    throw_error(ErrorCode::out_of_memory, "train",
                needs(host, p.host_available, what.c_str(), "available (MemAvailable); " + hint));
  }
}

int64_t parse_byte_size(const std::string& text, const char* flag) {
  const auto bad = [&] {
    throw_error(
        ErrorCode::invalid_argument, "train",
        fmt::format(
            "{} {}: expected bytes or a size like 24GiB (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)",
            flag, text));
  };
  // Decimal only: std::stod would also read hexadecimal (0x10GiB as 16 GiB), inf and nan.
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.') ||
      (text.size() > 1 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')))
    bad();
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    bad();
  }
  std::string unit = text.substr(used);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  const std::pair<const char*, double> units[] = {{"", 1},
                                                  {"B", 1},
                                                  {"KiB", 1024.0},
                                                  {"MiB", 1048576.0},
                                                  {"GiB", 1073741824.0},
                                                  {"TiB", 1099511627776.0},
                                                  {"KB", 1e3},
                                                  {"MB", 1e6},
                                                  {"GB", 1e9},
                                                  {"TB", 1e12}};
  for (const auto& [name, scale] : units) {
    if (unit != name) continue;
    const double bytes = value * scale;
    if (!std::isfinite(bytes) || bytes < 1 || bytes > 9.2e18) bad();
    return static_cast<int64_t>(bytes);
  }
  bad();
  return 0;
}

}  // namespace tandem::train
