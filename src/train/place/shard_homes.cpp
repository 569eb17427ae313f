#include "train/place/shard_homes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <unordered_map>

#include "tandem/amp_ops.h"
#include "tandem/error.h"
#include "tandem/optim/loss_scaler.h"
#include "tandem/optim_ops.h"
#include "tandem/pinned.h"
#include "tandem/shard_range.h"
#include "tandem/stream.h"

namespace tandem::train {
namespace {

const Stream& host_stream() {
  static const Stream s = runtime(DeviceKind::cpu).default_stream(0);
  return s;
}

// Pinned, zero-filled: the pads of a section take part in the reductions.
Tensor pinned_zeros(int64_t n, DType dtype) {
  Tensor t = pinned_empty({std::max<int64_t>(n, 1)}, dtype);
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

}  // namespace

ShardedHomes::ShardedHomes(comm::CommunicatorPtr comm, DType compute_dtype)
    : comm_(std::move(comm)), compute_dtype_(compute_dtype) {
  TD_CHECK_ARG(comm_ != nullptr, "train", "--zero 3: expected a communicator");
  rank_ = comm_->rank();
  world_ = comm_->world_size();
}

int ShardedHomes::add_part(const std::vector<nn::Parameter*>& params, const std::vector<bool>& upload_compute,
                           const nn::ValueSource& source) {
  TD_CHECK_ARG(params.size() == upload_compute.size(), "train", "--zero 3: {} parameters, {} upload flags",
               params.size(), upload_compute.size());
  Part part;
  int64_t na = 0, nb = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    nn::Parameter* p = params[k];
    TD_CHECK_ARG(p->value.device().is_host() && p->value.dtype() == DType::f32 && p->value.is_contiguous(), "train",
                 "--zero 3: parameter {} is {} on {}, expected contiguous f32 on the host", p->name,
                 dtype_name(p->value.dtype()), p->value.device().str());
    const bool b = upload_compute[k];
    TD_CHECK_ARG(!b || (p->compute.defined() && p->compute.dtype() == compute_dtype_ && p->compute.device().is_host()),
                 "train", "--zero 3: parameter {}'s compute copy is not {} on the host", p->name,
                 dtype_name(compute_dtype_));
    int64_t& n = b ? nb : na;
    part.tensors.push_back({p, b, n, p->value.numel(), p->value.shape()});
    n += p->value.numel();
  }
  // Each section cut by the shard rule (tandem/shard_range.h): padded to a multiple of N.
  const ShardRange range_a = shard_range(na, rank_, world_), range_b = shard_range(nb, rank_, world_);
  part.shard_a = range_a.size;
  part.shard_b = range_b.size;
  part.value_a = pinned_zeros(part.shard_a, DType::f32);
  part.value_b = pinned_zeros(part.shard_b, DType::f32);
  // The gradient shard and the compute copy come later, when the run says where (bind_grads,
  // enable_delay); the compute copy is otherwise rounded from the values at each gather.
  max_ab_ = std::max(max_ab_, part.shard_a + part.shard_b);
  max_b_ = std::max(max_b_, part.shard_b);
  for (const Tensor1& t : part.tensors) {
    const ShardRange& range = t.in_b ? range_b : range_a;
    const int64_t lo = std::max(t.offset, range.offset), hi = std::min(t.offset + t.numel, range.end());
    if (lo >= hi) continue;
    const int64_t local = lo - range.offset, len = hi - lo, from = lo - t.offset;
    nn::Parameter piece;
    piece.name = fmt::format("{}[{}:{}]", t.param->name, from, from + len);
    const Tensor& value = t.in_b ? part.value_b : part.value_a;
    if (source) {
      source(*t.param, from, len, static_cast<float*>(value.raw_data()) + local);
    } else {
      std::memcpy(static_cast<float*>(value.raw_data()) + local, t.param->value.data<float>() + from,
                  static_cast<size_t>(len) * sizeof(float));
    }
    piece.value = value.narrow(0, local, len);
    part.pieces.push_back(std::move(piece));
    part.piece_of.push_back(t.param);
    part.cuts.push_back({static_cast<size_t>(&t - part.tensors.data()), from, len, local});
  }
  parts_.push_back(std::move(part));
  // Taken once the part is in place (parts_ may reallocate, but a moved vector keeps its buffer).
  for (nn::Parameter& piece : parts_.back().pieces) parts_.back().piece_ptrs.push_back(&piece);
  if (grads_bound_) bind_grads(slab_.defined());  // a part added late gets grads as the others
  sync_flags();
  return static_cast<int>(parts_.size()) - 1;
}

void ShardedHomes::bind_grads(bool transient) {
  const bool was_transient = slab_.defined();
  if (transient) {
    if (!slab_.defined() || slab_.numel() < max_ab_) slab_ = pinned_zeros(max_ab_, DType::f32);
  } else {
    slab_ = Tensor();
  }
  for (Part& part : parts_) {
    if (transient) {
      part.grad = slab_.narrow(0, 0, std::max<int64_t>(part.shard_a + part.shard_b, 1));
    } else if (!part.grad.defined() || was_transient) {
      part.grad = pinned_zeros(part.shard_a + part.shard_b, DType::f32);
    }
    for (size_t i = 0; i < part.pieces.size(); ++i) {
      const Part::Cut& c = part.cuts[i];
      part.pieces[i].grad =
          part.grad.narrow(0, (part.tensors[c.tensor].in_b ? part.shard_a : 0) + c.local, c.len);
    }
  }
  grads_bound_ = true;
}

void ShardedHomes::round_compute(int p, const Tensor& out) const {
  const Part& part = parts_[static_cast<size_t>(p)];
  if (part.shard_b == 0) return;  // no compute copies (an fp32 run): section B is empty
  ops::narrow_from_f32(part.value_b.data<float>(), compute_dtype_, out.raw_data(), part.shard_b);
}

void ShardedHomes::sync_flags() {
  for (Part& part : parts_)
    for (size_t i = 0; i < part.pieces.size(); ++i) {
      part.pieces[i].decay = part.piece_of[i]->decay;
      part.pieces[i].requires_grad = part.piece_of[i]->requires_grad;
      part.pieces[i].low_precision = part.piece_of[i]->low_precision;
    }
}

std::vector<nn::Parameter*> ShardedHomes::all_pieces() const {
  std::vector<nn::Parameter*> out;
  for (const Part& part : parts_) out.insert(out.end(), part.piece_ptrs.begin(), part.piece_ptrs.end());
  return out;
}

std::vector<uint32_t> ShardedHomes::rounding_streams(const std::vector<nn::Parameter*>& model_params) const {
  std::unordered_map<const nn::Parameter*, uint32_t> at;
  for (size_t i = 0; i < model_params.size(); ++i) at[model_params[i]] = static_cast<uint32_t>(i);
  std::vector<uint32_t> out;
  for (const Part& part : parts_)
    for (size_t i = 0; i < part.pieces.size(); ++i) {
      const auto it = at.find(part.piece_of[i]);
      TD_CHECK_ARG(it != at.end(), "train", "--zero 3: parameter {} is not among the model's",
                   part.piece_of[i]->name);
      const auto from = static_cast<uint32_t>(part.cuts[i].from);
      out.push_back(from == 0 ? it->second : it->second ^ (from * 0x85EBCA6Bu));
    }
  return out;
}

int64_t ShardedHomes::stage_bytes(const std::vector<int>& parts) const {
  int64_t a = 0, b = 0;
  for (int p : parts) {
    a = std::max(a, parts_[static_cast<size_t>(p)].shard_a);
    b = std::max(b, parts_[static_cast<size_t>(p)].shard_b);
  }
  return world_ * (a * 4 + b * static_cast<int64_t>(dtype_size(compute_dtype_)) + (a + b) * 4);
}

ShardStage ShardedHomes::stage_for(const std::vector<int>& parts) const {
  int64_t a = 0, ab = 0, b = 0;
  for (int p : parts) {
    const Part& part = parts_[static_cast<size_t>(p)];
    a = std::max(a, part.shard_a);
    b = std::max(b, part.shard_b);
    ab = std::max(ab, part.shard_a + part.shard_b);
  }
  return {pinned_zeros(world_ * a, DType::f32), pinned_zeros(world_ * b, compute_dtype_),
          pinned_zeros(world_ * ab, DType::f32)};
}

void ShardedHomes::views(int p, const ShardStage& stage, std::vector<Tensor>& up, std::vector<Tensor>& grad) const {
  const Part& part = parts_[static_cast<size_t>(p)];
  up.clear();
  grad.clear();
  for (const Tensor1& t : part.tensors) {
    const Shape& shape = t.shape;
    up.push_back((t.in_b ? stage.b : stage.a).narrow(0, t.offset, t.numel).view(shape));
    grad.push_back(stage.grad.narrow(0, (t.in_b ? world_ * part.shard_a : 0) + t.offset, t.numel).view(shape));
  }
}

void ShardedHomes::gather(int p, const ShardStage& stage, int copy) {
  const Part& part = parts_[static_cast<size_t>(p)];
  const Tensor& a = copy < 0 ? part.value_a : part.up_a[copy];
  if (copy < 0 && !part.compute_b.defined() && part.shard_b > 0) {  // the compute copy, made as it goes
    if (!scratch_.defined()) scratch_ = pinned_zeros(max_b_, compute_dtype_);
    round_compute(p, scratch_);
  }
  const Tensor& b = copy >= 0 ? part.up_b[copy] : part.compute_b.defined() ? part.compute_b : scratch_;
  if (part.shard_a > 0) comm_->all_gather(a.narrow(0, 0, part.shard_a), stage.a.narrow(0, 0, world_ * part.shard_a), host_stream());
  if (part.shard_b > 0) comm_->all_gather(b.narrow(0, 0, part.shard_b), stage.b.narrow(0, 0, world_ * part.shard_b), host_stream());
}

int64_t ShardedHomes::enable_delay() {
  if (!grads_bound_) bind_grads(false);  // the stand-ins copy the pieces' grads
  int64_t bytes = 0;
  for (size_t p = 0; p < parts_.size(); ++p) {
    Part& part = parts_[p];
    if (!part.compute_b.defined()) {  // the delayed update writes copy 0: the compute copy itself
      part.compute_b = pinned_zeros(part.shard_b, compute_dtype_);
      round_compute(static_cast<int>(p), part.compute_b);
      for (size_t i = 0; i < part.pieces.size(); ++i) {
        const Part::Cut& c = part.cuts[i];
        if (part.tensors[c.tensor].in_b) part.pieces[i].compute = part.compute_b.narrow(0, c.local, c.len);
      }
      bytes += static_cast<int64_t>(part.compute_b.nbytes());
    }
    // Copy 0 of section B is the compute copy itself; section A's values, which the update
    // rewrites while the other copy is gathered, are copied twice.
    part.up_a[0] = pinned_copy(part.value_a);
    part.up_a[1] = pinned_copy(part.value_a);
    part.up_b[0] = part.compute_b;
    part.up_b[1] = pinned_copy(part.compute_b);
    bytes += static_cast<int64_t>(2 * part.value_a.nbytes() + part.compute_b.nbytes());
    for (int k = 0; k < 2; ++k) {
      part.stand[k] = part.pieces;
      part.stand_ptrs[k].clear();
      for (size_t i = 0; i < part.pieces.size(); ++i) {
        const Part::Cut& c = part.cuts[i];
        if (part.tensors[c.tensor].in_b) part.stand[k][i].compute = part.up_b[k].narrow(0, c.local, c.len);
        part.stand_ptrs[k].push_back(&part.stand[k][i]);
      }
    }
  }
  return bytes;
}

void ShardedHomes::publish(int p, int copy) {
  const Part& part = parts_[static_cast<size_t>(p)];
  std::memcpy(part.up_a[copy].raw_data(), part.value_a.raw_data(), part.value_a.nbytes());
}

void ShardedHomes::set_grad_compression(DType dtype) {
  TD_CHECK_ARG(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16, "train",
               "--zero 3: gradients reduce-scattered as {}, expected f32, bf16 or f16", dtype_name(dtype));
  wire_ = dtype;
}

void ShardedHomes::reduce_grads(int p, const ShardStage& stage) {
  if (!grads_bound_) bind_grads(false);
  const Part& part = parts_[static_cast<size_t>(p)];
  const int64_t a = part.shard_a, b = part.shard_b;
  if (wire_ != DType::f32) {  // --grad-compression fp16|bf16: each section in half precision
    Tensor half = Tensor::empty({std::max<int64_t>(1, world_ * std::max(a, b))}, wire_);
    Tensor mine = Tensor::empty({std::max<int64_t>(1, std::max(a, b))}, wire_);
    for (const auto& [from, n, to] : {std::tuple{int64_t{0}, a, int64_t{0}}, std::tuple{world_ * a, b, a}}) {
      if (n == 0) continue;
      ops::narrow_from_f32(stage.grad.data<float>() + from, wire_, half.raw_data(), world_ * n);
      comm_->reduce_scatter(half.narrow(0, 0, world_ * n), mine.narrow(0, 0, n), comm::ReduceOp::mean, host_stream());
      ops::widen_to_f32(mine.raw_data(), wire_, part.grad.data<float>() + to, n);
    }
    return;
  }
  if (a > 0)
    comm_->reduce_scatter(stage.grad.narrow(0, 0, world_ * a), part.grad.narrow(0, 0, a), comm::ReduceOp::mean,
                          host_stream());
  if (b > 0)
    comm_->reduce_scatter(stage.grad.narrow(0, world_ * a, world_ * b), part.grad.narrow(0, a, b),
                          comm::ReduceOp::mean, host_stream());
}

void ShardedHomes::clip_grads(double max_norm, const std::vector<nn::Parameter*>& order, const Tensor& total_norm) {
  if (!grads_bound_) bind_grads(false);
  std::unordered_map<const nn::Parameter*, size_t> at;
  for (size_t t = 0; t < order.size(); ++t) at[order[t]] = t;
  std::vector<Tensor> mine(order.size());  // this rank's piece of each parameter's gradient (one at most)
  for (const Part& part : parts_)
    for (size_t i = 0; i < part.pieces.size(); ++i) {
      const auto it = at.find(part.piece_of[i]);
      if (it != at.end() && part.piece_of[i]->requires_grad) mine[it->second] = part.pieces[i].grad;
    }
  if (world_ == 1) {  // every piece is its whole tensor: the one-process computation itself
    std::vector<Tensor> grads;
    for (const Tensor& g : mine)
      if (g.defined()) grads.push_back(g);
    ops::clip_grad_norm_(grads, max_norm, total_norm);
    return;
  }
  const auto count = static_cast<int64_t>(std::max<size_t>(1, order.size()));
  Tensor send = Tensor::zeros({count}, DType::i64), all = Tensor::zeros({world_ * count}, DType::i64);
  auto* sq = static_cast<double*>(send.raw_data());  // doubles travel as their 8 bytes
  for (size_t t = 0; t < mine.size(); ++t) {
    if (!mine[t].defined()) continue;
    const float* x = mine[t].data<float>();
    double s = 0.0;
    for (int64_t i = 0; i < mine[t].numel(); ++i) s += static_cast<double>(x[i]) * x[i];
    sq[t] = s;
  }
  comm_->all_gather(send, all, host_stream());
  const auto* every = static_cast<const double*>(all.raw_data());
  double total = 0.0;
  for (int64_t t = 0; t < count; ++t)
    for (int r = 0; r < world_; ++r) total += every[r * count + t];
  const double norm = std::sqrt(total);
  total_norm.data<float>()[0] = static_cast<float>(norm);
  // torch.nn.utils.clip_grad_norm_'s coefficient, in f32 as ops::clip_grad_norm_ computes it.
  const float coef = static_cast<float>(max_norm) / (static_cast<float>(norm) + 1e-6f);
  if (!(coef < 1.0f)) return;  // within the bound; a NaN norm leaves the gradients as they are
  for (const Tensor& g : mine) {
    if (!g.defined()) continue;
    float* x = g.data<float>();
    for (int64_t i = 0; i < g.numel(); ++i) x[i] *= coef;
  }
}

bool ShardedHomes::unscale_check(float scale) {
  bool found = false;
  for (const Part& part : parts_)
    for (const nn::Parameter& piece : part.pieces)
      if (piece.grad.defined() && piece.grad.numel() > 0)
        found = optim::unscale_check_host(piece.grad.data<float>(), piece.grad.numel(), scale) || found;
  if (world_ == 1) return found;
  // The count of ranks that found one: every rank gets the same sum.
  Tensor flag = Tensor::zeros({1}, DType::f32);
  flag.data<float>()[0] = found ? 1.0f : 0.0f;
  comm_->all_reduce(flag, comm::ReduceOp::sum, host_stream());
  return flag.data<float>()[0] > 0.0f;
}

std::vector<Tensor> ShardedHomes::gather_values(int p) {
  const Part& part = parts_[static_cast<size_t>(p)];
  Tensor all_a = Tensor::empty({std::max<int64_t>(1, world_ * part.shard_a)}, DType::f32);
  Tensor all_b = Tensor::empty({std::max<int64_t>(1, world_ * part.shard_b)}, DType::f32);
  if (part.shard_a > 0) comm_->all_gather(part.value_a.narrow(0, 0, part.shard_a), all_a.narrow(0, 0, world_ * part.shard_a), host_stream());
  if (part.shard_b > 0) comm_->all_gather(part.value_b.narrow(0, 0, part.shard_b), all_b.narrow(0, 0, world_ * part.shard_b), host_stream());
  std::vector<Tensor> out;
  for (const Tensor1& t : part.tensors)
    out.push_back((t.in_b ? all_b : all_a).narrow(0, t.offset, t.numel).view(t.shape).clone());
  return out;
}

void ShardedHomes::reload(int p) {
  Part& part = parts_[static_cast<size_t>(p)];
  const size_t csize = dtype_size(compute_dtype_);
  for (size_t i = 0; i < part.pieces.size(); ++i) {
    const Part::Cut& c = part.cuts[i];
    const Tensor1& t = part.tensors[c.tensor];
    const Tensor& v = t.param->value;
    TD_CHECK_ARG(v.device().is_host() && v.dtype() == DType::f32 && v.is_contiguous() && v.shape() == t.shape, "train",
                 "--zero 3: parameter {} is not a whole f32 host tensor of shape {}", t.param->name, shape_str(t.shape));
    std::memcpy(part.pieces[i].value.raw_data(), v.data<float>() + c.from, static_cast<size_t>(c.len) * sizeof(float));
    if (!t.in_b || !part.pieces[i].compute.defined()) continue;  // else rounded at each gather
    const Tensor& cp = t.param->compute;
    if (cp.defined() && cp.device().is_host() && cp.dtype() == compute_dtype_ && cp.shape() == t.shape) {
      std::memcpy(part.pieces[i].compute.raw_data(), static_cast<const uint8_t*>(cp.raw_data()) + c.from * csize,
                  static_cast<size_t>(c.len) * csize);
    } else {
      part.pieces[i].compute.copy_from(part.pieces[i].value.to(compute_dtype_));
    }
  }
}

std::vector<std::string> ShardedHomes::state_keys(const optim::Optimizer& opt, bool& step) {
  const std::string name = opt.name();
  step = name == "adam" || name == "adamw";
  if (step) return {"exp_avg", "exp_avg_sq"};
  for (const nn::NamedTensor& t : opt.state())  // sgd: a momentum buffer when it has momentum
    if (t.name.size() > 16 && t.name.compare(t.name.size() - 16, 16, ".momentum_buffer") == 0) return {"momentum_buffer"};
  return {};
}

std::vector<nn::NamedTensor> ShardedHomes::gather_state(int p, const optim::Optimizer& opt) const {
  std::vector<nn::NamedTensor> out;
  if (opt.step_count() == 0) return out;
  const Part& part = parts_[static_cast<size_t>(p)];
  bool step = false;
  std::vector<std::string> keys = state_keys(opt, step);
  // Every rank must issue the same gathers: sgd's momentum is agreed on (a rank without a
  // piece of any part has no state to look at).
  if (std::string(opt.name()) == "sgd") {
    Tensor mine = Tensor::zeros({1}, DType::i64), all = Tensor::zeros({world_}, DType::i64);
    *static_cast<int64_t*>(mine.raw_data()) = keys.empty() ? 0 : 1;
    comm_->all_gather(mine, all, host_stream());
    const auto* a = static_cast<const int64_t*>(all.raw_data());
    keys = std::any_of(a, a + world_, [](int64_t v) { return v != 0; }) ? std::vector<std::string>{"momentum_buffer"}
                                                                         : std::vector<std::string>{};
  }
  std::vector<nn::NamedTensor> mine = opt.state();
  for (const std::string& key : keys) {
    DType dt = DType::f32;  // the moments f32 or bf16 (--optimizer-moments)
    for (const auto& [k, d] : opt.state_keys())
      if (k == key) dt = d;
    const size_t es = dtype_size(dt);
    Tensor shard_a = Tensor::zeros({std::max<int64_t>(1, part.shard_a)}, dt);
    Tensor shard_b = Tensor::zeros({std::max<int64_t>(1, part.shard_b)}, dt);
    for (size_t i = 0; i < part.pieces.size(); ++i) {
      const std::string name = part.pieces[i].name + "." + key;
      const auto it = std::find_if(mine.begin(), mine.end(), [&](const nn::NamedTensor& t) { return t.name == name; });
      TD_CHECK(it != mine.end() && it->tensor.dtype() == dt, ErrorCode::internal, "train",
               "--zero 3: rank {} holds no {} optimizer state '{}'", rank_, dtype_name(dt), name);
      const Part::Cut& c = part.cuts[i];
      auto* dst = static_cast<uint8_t*>((part.tensors[c.tensor].in_b ? shard_b : shard_a).raw_data()) + c.local * es;
      std::memcpy(dst, it->tensor.raw_data(), static_cast<size_t>(c.len) * es);
    }
    Tensor all_a = Tensor::empty({std::max<int64_t>(1, world_ * part.shard_a)}, dt);
    Tensor all_b = Tensor::empty({std::max<int64_t>(1, world_ * part.shard_b)}, dt);
    if (part.shard_a > 0) comm_->all_gather(shard_a.narrow(0, 0, part.shard_a), all_a.narrow(0, 0, world_ * part.shard_a), host_stream());
    if (part.shard_b > 0) comm_->all_gather(shard_b.narrow(0, 0, part.shard_b), all_b.narrow(0, 0, world_ * part.shard_b), host_stream());
    for (const Tensor1& t : part.tensors) {
      if (!t.param->requires_grad) continue;
      out.push_back({t.param->name + "." + key, (t.in_b ? all_b : all_a).narrow(0, t.offset, t.numel).view(t.shape).clone(), false});
    }
  }
  if (step)
    for (const Tensor1& t : part.tensors) {
      if (!t.param->requires_grad) continue;
      Tensor n = Tensor::empty({}, DType::i64);
      *n.data<int64_t>() = opt.step_count();  // every piece is updated each step
      out.push_back({t.param->name + ".step", n, false});
    }
  return out;
}

std::vector<nn::NamedTensor> ShardedHomes::cut_state(const std::vector<nn::NamedTensor>& state,
                                                     const optim::Optimizer& opt) const {
  std::vector<nn::NamedTensor> out;
  if (state.empty()) return out;
  const std::string name = opt.name();
  const bool adam = name == "adam" || name == "adamw";
  std::vector<std::string> keys = adam ? std::vector<std::string>{"exp_avg", "exp_avg_sq"} : std::vector<std::string>{};
  for (const nn::NamedTensor& t : state)
    if (!adam && t.name.size() > 16 && t.name.compare(t.name.size() - 16, 16, ".momentum_buffer") == 0) {
      keys = {"momentum_buffer"};
      break;
    }
  const auto find = [&](const std::string& n) -> const Tensor& {
    const auto it = std::find_if(state.begin(), state.end(), [&](const nn::NamedTensor& t) { return t.name == n; });
    TD_CHECK_ARG(it != state.end(), "train", "--zero 3: the optimizer state lacks '{}'", n);
    return it->tensor;
  };
  for (const Part& part : parts_)
    for (size_t i = 0; i < part.pieces.size(); ++i) {
      const Part::Cut& c = part.cuts[i];
      const Tensor1& t = part.tensors[c.tensor];
      if (!t.param->requires_grad) continue;
      for (const std::string& key : keys) {
        const Tensor& full = find(t.param->name + "." + key);
        // f32 or bf16 moments (load_state converts one into the other: a resume with --force).
        TD_CHECK_ARG((full.dtype() == DType::f32 || full.dtype() == DType::bf16) && full.shape() == t.shape &&
                         full.device().is_host() && full.is_contiguous(),
                     "train",
                     "--zero 3: optimizer state '{}.{}' is {} {}, expected f32 or bf16 {}", t.param->name, key,
                     dtype_name(full.dtype()), shape_str(full.shape()), shape_str(t.shape));
        const size_t es = dtype_size(full.dtype());
        Tensor piece = Tensor::empty({c.len}, full.dtype());
        std::memcpy(piece.raw_data(), static_cast<const uint8_t*>(full.raw_data()) + c.from * es,
                    static_cast<size_t>(c.len) * es);
        out.push_back({part.pieces[i].name + "." + key, piece, false});
      }
      if (adam) out.push_back({part.pieces[i].name + ".step", find(t.param->name + ".step"), false});
    }
  return out;
}

int64_t ShardedHomes::host_bytes() const {
  int64_t n = 0;
  for (const Part& part : parts_)
    n += static_cast<int64_t>(part.value_a.nbytes() + part.value_b.nbytes() + part.compute_b.nbytes() +
                              (slab_.defined() ? 0 : part.grad.nbytes()));
  return n + static_cast<int64_t>(slab_.nbytes() + scratch_.nbytes());
}

int64_t ShardedHomes::gather_bytes(int p) const {
  const Part& part = parts_[static_cast<size_t>(p)];
  return part.shard_a * 4 + part.shard_b * static_cast<int64_t>(dtype_size(compute_dtype_));
}

int64_t ShardedHomes::reduce_bytes(int p) const {
  const Part& part = parts_[static_cast<size_t>(p)];
  return world_ * (part.shard_a + part.shard_b) * static_cast<int64_t>(dtype_size(wire_));
}

int64_t ShardedHomes::shard_elements() const {
  int64_t n = 0;
  for (const Part& part : parts_) n += part.shard_a + part.shard_b;
  return n;
}

}  // namespace tandem::train
