#include "train/checkpoint/shard_capture.h"

#include <map>
#include <set>

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/shard_range.h"

namespace tandem::train::checkpoint {

using json = nlohmann::json;

ShardSources shard_sources(Run& r, const Tensor& accumulator) {
  const int rank = r.comm ? r.comm->rank() : 0, world = r.comm ? r.comm->world_size() : 1;
  const ShardState home = r.home->shard_state();
  ShardSources out;
  out.pieces = json::object();
  const auto add = [&](const std::string& name, int64_t begin, const Tensor& flat, const Shape& shape) {
    const std::string key = fmt::format("{}@{}", name, begin);
    TD_CHECK(flat.is_contiguous() && !out.pieces.contains(key), ErrorCode::internal, "checkpoint",
             "shard piece '{}' is not contiguous or not unique", key);
    out.tensors.emplace_back(key, flat);
    out.pieces[key] = {{"name", name}, {"begin", begin}, {"shape", shape}};
  };
  // A tensor every rank holds: this rank writes its range of it.
  const auto add_replicated = [&](const std::string& name, const Tensor& t) {
    const ShardRange s = shard_range(t.numel(), rank, world);
    const int64_t b = s.begin_in(t.numel()), e = s.end_in(t.numel());
    if (e > b) add(name, b, t.view({t.numel()}).narrow(0, b, e - b), t.shape());
  };
  std::set<std::string> params;
  for (const nn::Parameter* p : r.params) params.insert(p->name);
  std::map<std::string, Shape> shapes;
  for (const nn::NamedTensor& t : r.model->state_dict()) {
    shapes["model." + t.name] = t.tensor.shape();
    if (home.params_sharded && params.count(t.name)) continue;  // in home.owned
    add_replicated("model." + t.name, t.tensor);
  }
  for (const nn::NamedTensor& t : home.replicated) add_replicated(t.name, t.tensor);
  for (const StateSlice& s : home.owned) {
    Shape shape;
    if (s.name.rfind("model.", 0) == 0) {
      shape = shapes.at(s.name);
    } else if (s.tensor.dtype() == DType::i64 && s.tensor.numel() == 1) {
      shape = {};  // a step counter
    } else {  // "optim.<parameter>.<slot>": shaped as the parameter
      const std::string param = "model." + s.name.substr(6, s.name.rfind('.') - 6);
      const auto it = shapes.find(param);
      TD_CHECK(it != shapes.end(), ErrorCode::internal, "checkpoint", "state '{}' names no parameter", s.name);
      shape = it->second;
    }
    add(s.name, s.begin, s.tensor.view({s.tensor.numel()}), shape);
  }
  if (rank == 0) {
    add("metrics.accumulator", 0, accumulator, accumulator.shape());
    if (r.scaler) add("scaler.state", 0, r.scaler->state(), r.scaler->state().shape());
  }
  return out;
}

json weights_record(const Run& r) {
  json meta = json::object(), tied = json::array();
  for (const auto& [k, v] : r.model->config_metadata()) meta[k] = v;
  for (const auto& [alias, source] : r.model->tied_state()) tied.push_back({alias, source});
  return {{"model", r.cfg.model}, {"metadata", meta}, {"tied", tied}};
}

}  // namespace tandem::train::checkpoint
