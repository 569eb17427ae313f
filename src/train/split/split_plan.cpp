#include "train/split/split_plan.h"
#include "tandem/device_traits.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "tandem/error.h"

namespace tandem::train {

static std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  if (!text.empty() && text.back() == ',') out.emplace_back();
  return out;
}

static std::vector<int64_t> largest_remainder(int64_t batch, const std::vector<double>& weights) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int64_t> parts(weights.size());
  std::vector<std::pair<double, size_t>> rest;
  int64_t given = 0;
  for (size_t d = 0; d < weights.size(); ++d) {
    const double exact = static_cast<double>(batch) * weights[d] / total;
    parts[d] = static_cast<int64_t>(std::floor(exact));
    given += parts[d];
    rest.emplace_back(exact - static_cast<double>(parts[d]), d);
  }
  // Ties go to the earlier device, so the result does not depend on the sort's stability.
  std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (size_t i = 0; given < batch; ++i, ++given) ++parts[rest[i % rest.size()].second];
  return parts;
}

std::vector<int64_t> partition_batch(int64_t batch, const std::vector<double>& weights,
                                     const std::vector<std::string>& names) {
  const std::vector<int64_t> parts = largest_remainder(batch, weights);
  for (size_t d = 0; d < parts.size(); ++d)
    TD_CHECK_ARG(parts[d] >= 1, "train",
                 "--split: the weights give {} 0 of the {} samples of a batch; expected at least one sample per "
                 "device (raise its weight or --batch-size)",
                 d < names.size() ? names[d] : fmt::format("device {}", d), batch);
  return parts;
}

std::vector<int64_t> partition_at_least_one(int64_t batch, const std::vector<double>& weights) {
  std::vector<int64_t> parts = largest_remainder(batch, weights);
  for (int64_t& p : parts) {
    if (p >= 1) continue;
    auto largest = std::max_element(parts.begin(), parts.end());
    --*largest;
    p = 1;
  }
  return parts;
}

static double parse_weight(const std::string& w, const std::string& flag) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(w, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TD_CHECK_ARG(used == w.size() && !w.empty() && std::isfinite(v) && v > 0, "train",
               "--split {}: expected auto or one positive weight per device (e.g. 3,1), got '{}'", flag, w);
  return v;
}

SplitPlan parse_split(const std::string& devices, const std::string& split, int64_t batch_size) {
  SplitPlan plan;
  std::vector<std::string> names;
  for (const std::string& text : comma_list(devices)) {
    DeviceSpec spec;
    try {
      spec = DeviceSpec::parse(text);
    } catch (const Error& e) {
      throw_error(ErrorCode::invalid_argument, "train", fmt::format("--devices {}: {}", devices, e.what()));
    }
    for (const DeviceSpec& seen : plan.devices)
      TD_CHECK_ARG(!(seen.device == spec.device), "train",
                   "--devices {}: {} is listed twice; expected each device once (a replica per device)", devices,
                   spec.device.str());
    plan.devices.push_back(spec);
    names.push_back(spec.device.str());
  }
  TD_CHECK_ARG(plan.devices.size() >= 2, "train",
               "--devices {}: expected at least two devices separated by commas (e.g. cuda:0,cpu); use --device for one",
               devices);
  std::vector<Device> kinds;
  for (const DeviceSpec& s : plan.devices) kinds.push_back(s.device);
  const std::string conflict = copy_path_conflict(kinds);
  TD_CHECK_ARG(conflict.empty(), "train", "--devices {}: {}; expected one accelerator kind, with or without cpu",
               devices, conflict);
  TD_CHECK_ARG(batch_size >= static_cast<int64_t>(plan.devices.size()), "train",
               "--batch-size {}: expected at least one sample per device of --devices {}", batch_size, devices);
  if (split == "auto") return plan;
  plan.automatic = false;
  const std::vector<std::string> ws = comma_list(split);
  TD_CHECK_ARG(ws.size() == plan.devices.size(), "train",
               "--split {}: expected auto or {} weights, one per device of --devices {}, got {}", split,
               plan.devices.size(), devices, ws.size());
  for (const std::string& w : ws) plan.weights.push_back(parse_weight(w, split));
  partition_batch(batch_size, plan.weights, names);  // throws for a device without samples
  return plan;
}

}  // namespace tandem::train
