#include "train/place/placed_blocks.h"

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

// The block a --place prefix names exactly; -1 for anything else.
int64_t block_of(const std::string& prefix, const nn::ModelBlocks& blocks) {
  for (size_t i = 0; i < blocks.blocks.size(); ++i)
    if (blocks.blocks[i].name == prefix) return static_cast<int64_t>(i);
  return -1;
}

// The block `prefix` lies inside ("transformer.h.1" for "transformer.h.1.attn"), else "". A
// name inside a block is an error of its own (a model is placed by whole blocks).
std::string enclosing_block(const std::string& prefix, const nn::ModelBlocks& blocks) {
  for (const nn::NamedChild& b : blocks.blocks)
    if (prefix.size() > b.name.size() && prefix.compare(0, b.name.size(), b.name) == 0 &&
        prefix[b.name.size()] == '.')
      return b.name;
  return "";
}

}  // namespace

std::vector<DeviceSpec> parse_block_place(const std::string& text, const nn::ModelBlocks& blocks,
                                          Device home) {
  const int64_t n = static_cast<int64_t>(blocks.blocks.size());
  TD_CHECK_ARG(n > 0, "train", "--place {}: the model declares no blocks to place", text);
  const std::string range = blocks.blocks.front().name + ".." + blocks.blocks.back().name;
  std::vector<DeviceSpec> specs(blocks.blocks.size(), DeviceSpec{home, {}});
  int64_t next = 0;
  for (const auto& [prefix, device] : place_entries(text)) {
    const int64_t k = block_of(prefix, blocks);
    const std::string inside = k >= 0 ? "" : enclosing_block(prefix, blocks);
    TD_CHECK_ARG(
        inside.empty(), "train",
        "--place {}: '{}' lies inside block {}; a {} is placed by whole blocks, expected {}", text,
        prefix, inside, blocks.kind, range);
    TD_CHECK_ARG(k >= 0, "train",
                 "--place {}: '{}' names no block of this {}; expected {} ({} stay on --device {})",
                 text, prefix, blocks.kind, range, blocks.outer_phrase, home.str());
    TD_CHECK_ARG(k >= next, "train",
                 "--place {}: block {} is listed out of order or twice; expected blocks in the "
                 "model's order",
                 text, prefix);
    const DeviceSpec spec = place_device(text, device);
    for (int64_t i = k; i < n; ++i) specs[static_cast<size_t>(i)] = spec;
    next = k + 1;
  }
  return specs;
}

std::string place_blocks(nn::Module& model, const std::vector<Device>& devices, Device home) {
  const nn::ModelBlocks blocks = model.blocks();
  TD_CHECK_ARG(blocks.places_blocks, "place", "{} does not run its blocks on devices of their own",
               blocks.kind.empty() ? "the model" : blocks.kind);
  TD_CHECK_ARG(devices.size() == blocks.blocks.size(), "place",
               "expected a device per block ({}), got {}", blocks.blocks.size(), devices.size());
  if (!home.is_host()) model.to(home);
  for (size_t i = 0; i < devices.size(); ++i) {
    const Device d = devices[i];
    if (!(d == home)) blocks.blocks[i].module->to(d);
    if (!d.is_host())
      runtime_for(d).current_stream(d.index).set_label("compute");  // its trace track
  }
  auto copier = std::make_shared<BoundaryCopier>();
  model.set_block_devices(devices,
                          [copier](const Tensor& t, Device to) { return copier->cross(t, to); });
  std::string out;
  size_t begin = 0;
  for (size_t i = 1; i <= devices.size(); ++i) {
    if (i < devices.size() && devices[i] == devices[begin]) continue;
    const std::string& first = blocks.blocks[begin].name;
    const std::string range = i - 1 == begin ? first : first + ".." + blocks.blocks[i - 1].name;
    out += fmt::format("{}{} on {}", out.empty() ? "" : ", ", range, devices[begin].str());
    begin = i;
  }
  return out + fmt::format(" ({} on {})", blocks.outer_label, home.str());
}

}  // namespace tandem::train
