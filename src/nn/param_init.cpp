#include "tandem/nn/param_init.h"

#include <cmath>
#include <memory>

#include "tandem/error.h"
#include "tandem/nn/module.h"
#include "tandem/rng.h"

namespace tandem::nn {

void write_init(const ParamInit& init, int64_t numel, int64_t begin, int64_t n, float* dst) {
  TD_CHECK_ARG(init.kind != ParamInit::Kind::unset, "init", "a parameter without a recorded init cannot be filled");
  TD_CHECK_ARG(begin >= 0 && n >= 0 && begin + n <= numel, "init", "elements [{}, {}) of a tensor of {}", begin,
               begin + n, numel);
  const int64_t end = begin + n;
  if (init.kind == ParamInit::Kind::constant) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(init.scale);
    return;
  }
  Philox rng(init.seed, init.index);
  if (init.kind == ParamInit::Kind::uniform) {
    const auto bound = static_cast<float>(init.scale);
    rng.skip(static_cast<uint64_t>(begin));
    for (int64_t i = begin; i < end; ++i) dst[i - begin] = bound * (2.0f * rng.uniform() - 1.0f);
    return;
  }
  // normal: the pairs that overlap [begin, end), each from draws 2j and 2j + 1
  const auto stddev = static_cast<float>(init.scale);
  constexpr double kTwoPi = 6.283185307179586;
  const int64_t first = begin & ~int64_t{1};
  rng.skip(static_cast<uint64_t>(first));
  for (int64_t i = first; i < end; i += 2) {
    const double u1 = 1.0 - static_cast<double>(rng.uniform()), u2 = rng.uniform();  // u1 in (0, 1]
    const double r = std::sqrt(-2.0 * std::log(u1));
    if (i >= begin) dst[i - begin] = static_cast<float>(stddev * r * std::cos(kTwoPi * u2));
    if (i + 1 >= begin && i + 1 < end) dst[i + 1 - begin] = static_cast<float>(stddev * r * std::sin(kTwoPi * u2));
  }
}

ValueSource recorded_init_source(std::unordered_map<const Parameter*, ParamInit> inits) {
  auto table = std::make_shared<const std::unordered_map<const Parameter*, ParamInit>>(std::move(inits));
  return [table](const Parameter& p, int64_t begin, int64_t n, float* dst) {
    const auto it = table->find(&p);
    TD_CHECK_ARG(it != table->end(), "init", "parameter {} has no recorded init", p.name);
    write_init(it->second, p.value.numel(), begin, n, dst);
  };
}

bool has_values(const Parameter& p) { return p.value.defined() && p.value.raw_data() != nullptr; }

}  // namespace tandem::nn
