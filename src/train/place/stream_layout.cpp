#include "train/place/stream_layout.h"

#include <cmath>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/module_walk.h"

namespace tandem::train {
namespace {

[[noreturn]] void unsupported(const std::string& model_name) {
  throw_error(ErrorCode::invalid_argument, "train",
              fmt::format("--param-device cpu: expected a GPT or a ResNet (gpt-*, resnet*), got --model {}",
                          model_name));
}

// Every BatchNorm2d's [C] running statistics under `m` (depth first).
void collect_buffers(nn::Module& m, std::vector<Tensor*>& out) {
  for (nn::BatchNorm2d* bn : nn::modules_of<nn::BatchNorm2d>(m)) {
    out.push_back(&bn->running_mean);
    out.push_back(&bn->running_var);
  }
}

}  // namespace

bool streamable(nn::Module& model) { return !model.blocks().blocks.empty(); }

StreamLayout stream_layout(nn::Module& model, const std::string& model_name) {
  const nn::ModelBlocks d = model.blocks();
  if (d.blocks.empty()) unsupported(model_name);
  StreamLayout l;
  l.outer_label = d.outer_label;
  std::vector<std::string> prefixes;  // per block: "<name>."
  for (const nn::NamedChild& b : d.blocks) {
    prefixes.push_back(b.name + ".");
    l.block_buffers.emplace_back();
    collect_buffers(*b.module, l.block_buffers.back());
  }
  l.blocks.resize(prefixes.size());
  for (nn::Parameter* p : model.parameters()) {  // full state-dict names
    int part = nn::kOuterPart;
    for (size_t b = 0; b < prefixes.size() && part == nn::kOuterPart; ++b)
      if (p->name.rfind(prefixes[b], 0) == 0) part = static_cast<int>(b);
    (part == nn::kOuterPart ? l.outer : l.blocks[static_cast<size_t>(part)]).push_back(p);
  }
  for (const nn::NamedChild& o : d.outer) collect_buffers(*o.module, l.outer_buffers);
  l.install = [&model](nn::ParamStream* s) { model.set_param_stream(s); };
  return l;
}

int device_parts_for_split(const std::vector<int64_t>& elements, double host_share) {
  TD_CHECK_ARG(host_share > 0 && host_share <= 1, "train",
               "--optimizer-split {}: expected the host's share of the update, in (0, 1]", host_share);
  int64_t total = 0;
  for (int64_t n : elements) total += n;
  if (host_share >= 1 || elements.empty() || total == 0) return 0;
  int k = 0;
  int64_t device = 0;
  while (k + 1 < static_cast<int>(elements.size()) &&  // one block at least stays streamed
         static_cast<double>(total - device - elements[static_cast<size_t>(k)]) >= host_share * static_cast<double>(total))
    device += elements[static_cast<size_t>(k++)];
  TD_CHECK_ARG(k > 0, "train",
               "--optimizer-split {}: the smallest device share is the outer part's ({:.1f}% of the parameters, "
               "updated last); expected a host share of at most {:.3f}",
               host_share, 100.0 * static_cast<double>(elements[0]) / static_cast<double>(total),
               std::floor(1000.0 * static_cast<double>(total - elements[0]) / static_cast<double>(total)) / 1000.0);
  return k;
}

std::vector<int64_t> part_elements(const StreamLayout& layout) {
  std::vector<int64_t> out{0};
  for (const nn::Parameter* p : layout.outer) out[0] += p->value.numel();
  for (const auto& block : layout.blocks) {
    out.push_back(0);
    for (const nn::Parameter* p : block) out.back() += p->value.numel();
  }
  return out;
}

std::vector<int> stream_parts(nn::Module& model, const std::string& model_name) {
  const StreamLayout l = stream_layout(model, model_name);
  std::unordered_map<const nn::Parameter*, int> part;
  for (size_t b = 0; b < l.blocks.size(); ++b)
    for (const nn::Parameter* p : l.blocks[b]) part[p] = static_cast<int>(b);
  std::vector<int> out;
  for (nn::Parameter* p : model.parameters()) {
    const auto it = part.find(p);
    out.push_back(it == part.end() ? nn::kOuterPart : it->second);
  }
  return out;
}

}  // namespace tandem::train
