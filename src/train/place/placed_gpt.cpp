#include "train/place/placed_gpt.h"

#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/stream.h"
#include "train/place/boundary_copy.h"
#include "train/place/placed_model.h"

namespace tandem::train {

namespace {

// The block a --place prefix names: exactly "transformer.h.K" (K in decimal, no leading
// zeros, < n_layer); -1 for anything else. A name inside a block is an error of its own
// (a GPT is placed by whole blocks), reported by the caller.
int64_t block_of(const std::string& prefix, int64_t n_layer) {
  const std::string head = "transformer.h.";
  if (prefix.compare(0, head.size(), head) != 0) return -1;
  const std::string digits = prefix.substr(head.size());
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos ||
      (digits.size() > 1 && digits[0] == '0'))
    return -1;
  const int64_t k = std::stoll(digits);
  return k < n_layer ? k : -1;
}

// "transformer.h.K" when `prefix` lies inside that block ("transformer.h.1.attn"), else "".
std::string enclosing_block(const std::string& prefix, int64_t n_layer) {
  const size_t dot = prefix.find('.', std::string("transformer.h.").size());
  if (dot == std::string::npos) return "";
  const std::string block = prefix.substr(0, dot);
  return block_of(block, n_layer) >= 0 ? block : "";
}

}  // namespace

std::vector<DeviceSpec> parse_gpt_place(const std::string& text, const nn::Gpt& gpt, Device home) {
  const int64_t n_layer = static_cast<int64_t>(gpt.h.size());
  std::vector<DeviceSpec> specs(gpt.h.size(), DeviceSpec{home, {}});
  int64_t next = 0;
  for (const auto& [prefix, device] : place_entries(text)) {
    const int64_t k = block_of(prefix, n_layer);
    const std::string inside = k >= 0 ? "" : enclosing_block(prefix, n_layer);
    TD_CHECK_ARG(inside.empty(), "train",
                 "--place {}: '{}' lies inside block {}; a GPT is placed by whole blocks, expected "
                 "transformer.h.0..transformer.h.{}",
                 text, prefix, inside, n_layer - 1);
    TD_CHECK_ARG(k >= 0, "train",
                 "--place {}: '{}' names no block of this GPT; expected transformer.h.0..transformer.h.{} (the "
                 "embedding, ln_f and the tied lm_head stay on --device {})",
                 text, prefix, n_layer - 1, home.str());
    TD_CHECK_ARG(k >= next, "train",
                 "--place {}: block {} is listed out of order or twice; expected blocks in the model's order", text,
                 prefix);
    const DeviceSpec spec = place_device(text, device);
    for (int64_t i = k; i < n_layer; ++i) specs[static_cast<size_t>(i)] = spec;
    next = k + 1;
  }
  return specs;
}

std::string place_gpt(nn::Gpt& gpt, const std::vector<Device>& devices, Device home) {
  TD_CHECK_ARG(devices.size() == gpt.h.size(), "place", "expected a device per block ({}), got {}", gpt.h.size(),
               devices.size());
  if (!home.is_host()) gpt.to(home);
  for (size_t i = 0; i < devices.size(); ++i) {
    const Device d = devices[i];
    if (!(d == home)) gpt.h[i]->to(d);
    if (!d.is_host()) runtime_for(d).current_stream(d.index).set_label("compute");  // its trace track
  }
  auto copier = std::make_shared<BoundaryCopier>();
  gpt.set_block_devices(devices, [copier](const Tensor& t, Device to) { return copier->cross(t, to); });
  std::string out;
  size_t begin = 0;
  for (size_t i = 1; i <= devices.size(); ++i) {
    if (i < devices.size() && devices[i] == devices[begin]) continue;
    const std::string range = i - 1 == begin ? fmt::format("transformer.h.{}", begin)
                                             : fmt::format("transformer.h.{}..transformer.h.{}", begin, i - 1);
    out += fmt::format("{}{} on {}", out.empty() ? "" : ", ", range, devices[begin].str());
    begin = i;
  }
  return out + fmt::format(" (embedding, ln_f and lm_head on {})", home.str());
}

}  // namespace tandem::train
