#include "train/place/shard_homes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "tandem/error.h"
#include "tandem/pinned.h"
#include "tandem/stream.h"

namespace tandem::train {
namespace {

const Stream& host_stream() {
  static const Stream s = runtime(DeviceKind::cpu).default_stream(0);
  return s;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

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

int ShardedHomes::add_part(const std::vector<nn::Parameter*>& params, const std::vector<bool>& upload_compute) {
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
  part.shard_a = ceil_div(na, world_);
  part.shard_b = ceil_div(nb, world_);
  part.value_a = pinned_zeros(part.shard_a, DType::f32);
  part.value_b = pinned_zeros(part.shard_b, DType::f32);
  part.compute_b = pinned_zeros(part.shard_b, compute_dtype_);
  part.grad = pinned_zeros(part.shard_a + part.shard_b, DType::f32);
  const size_t csize = dtype_size(compute_dtype_);
  for (const Tensor1& t : part.tensors) {
    const int64_t shard = t.in_b ? part.shard_b : part.shard_a;
    const int64_t lo = std::max(t.offset, rank_ * shard), hi = std::min(t.offset + t.numel, (rank_ + 1) * shard);
    if (lo >= hi) continue;
    const int64_t local = lo - rank_ * shard, len = hi - lo, from = lo - t.offset;
    nn::Parameter piece;
    piece.name = fmt::format("{}[{}:{}]", t.param->name, from, from + len);
    const Tensor& value = t.in_b ? part.value_b : part.value_a;
    std::memcpy(static_cast<float*>(value.raw_data()) + local, t.param->value.data<float>() + from,
                static_cast<size_t>(len) * sizeof(float));
    piece.value = value.narrow(0, local, len);
    piece.grad = part.grad.narrow(0, (t.in_b ? part.shard_a : 0) + local, len);
    if (t.in_b) {
      std::memcpy(static_cast<uint8_t*>(part.compute_b.raw_data()) + local * csize,
                  static_cast<const uint8_t*>(t.param->compute.raw_data()) + from * csize,
                  static_cast<size_t>(len) * csize);
      piece.compute = part.compute_b.narrow(0, local, len);
    }
    part.pieces.push_back(std::move(piece));
    part.piece_of.push_back(t.param);
  }
  for (nn::Parameter& p : part.pieces) part.piece_ptrs.push_back(&p);
  parts_.push_back(std::move(part));
  // The pieces' addresses are stable: each part's vector is built whole before it moves.
  for (size_t i = 0; i < parts_.back().pieces.size(); ++i) parts_.back().piece_ptrs[i] = &parts_.back().pieces[i];
  sync_flags();
  return static_cast<int>(parts_.size()) - 1;
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

void ShardedHomes::gather(int p, const ShardStage& stage) {
  const Part& part = parts_[static_cast<size_t>(p)];
  if (part.shard_a > 0) comm_->all_gather(part.value_a.narrow(0, 0, part.shard_a), stage.a.narrow(0, 0, world_ * part.shard_a), host_stream());
  if (part.shard_b > 0)
    comm_->all_gather(part.compute_b.narrow(0, 0, part.shard_b), stage.b.narrow(0, 0, world_ * part.shard_b), host_stream());
}

void ShardedHomes::reduce_grads(int p, const ShardStage& stage) {
  const Part& part = parts_[static_cast<size_t>(p)];
  const int64_t a = part.shard_a, b = part.shard_b;
  if (a > 0)
    comm_->reduce_scatter(stage.grad.narrow(0, 0, world_ * a), part.grad.narrow(0, 0, a), comm::ReduceOp::mean,
                          host_stream());
  if (b > 0)
    comm_->reduce_scatter(stage.grad.narrow(0, world_ * a, world_ * b), part.grad.narrow(0, a, b),
                          comm::ReduceOp::mean, host_stream());
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

int64_t ShardedHomes::host_bytes() const {
  int64_t n = 0;
  for (const Part& part : parts_)
    n += static_cast<int64_t>(part.value_a.nbytes() + part.value_b.nbytes() + part.compute_b.nbytes() +
                              part.grad.nbytes());
  return n;
}

int64_t ShardedHomes::gather_bytes(int p) const {
  const Part& part = parts_[static_cast<size_t>(p)];
  return part.shard_a * 4 + part.shard_b * static_cast<int64_t>(dtype_size(compute_dtype_));
}

int64_t ShardedHomes::reduce_bytes(int p) const {
  const Part& part = parts_[static_cast<size_t>(p)];
  return world_ * (part.shard_a + part.shard_b) * 4;
}

int64_t ShardedHomes::shard_elements() const {
  int64_t n = 0;
  for (const Part& part : parts_) n += part.shard_a + part.shard_b;
  return n;
}

}  // namespace tandem::train
