// OffloadOptimizer's maths: an ordinary optimizer (make_optimizer) over stand-ins that view
// the flat host buffers, its state slots in flat pinned buffers of their own (see
// optim/offload_impl.h). The update thread calls its update_part once per bucket, so the
// offloaded update is the on-device optimizer's own (moments dtype included).
#include "optim/offload_impl.h"

namespace tandem::optim {

void OffloadOptimizer::Impl::build_maths(const std::string& name, const OptimizerOptions& options,
                                         const std::vector<std::string>& names) {
  const size_t n = params.size();
  state_at.assign(n, 0);
  for (int slot = 0; slot < 2; ++slot) pieces[slot].resize(n);
  const bool two = grads[1].defined() && !sharded();  // delay 1: a second gradient buffer
  for (size_t i = 0; i < n; ++i) {
    nn::Parameter& piece = pieces[0][i];
    piece.name = names[i];
    piece.value = Tensor::empty({0});
    piece.requires_grad = false;
    if (offset[i] < 0) continue;  // not a member: never updated here
    // The parameter's range [a, b) of the flat buffers, within this rank's block when sharded.
    const Block blk = block_of(bucket_of[i]);
    const int64_t a = std::max(offset[i], blk.lo), b = std::min(offset[i] + numel(i), blk.hi);
    if (a >= b) continue;  // sharded: the parameter lies in other ranks' blocks
    const int64_t st = a - (blk.lo - blk.base);
    const Shape shape = sharded() ? Shape{b - a} : params[i]->value.shape();
    state_at[i] = st;
    piece.value = master.narrow(0, a, b - a).view(shape);
    piece.grad =
        sharded() ? block_grads.narrow(0, st, b - a) : grads[0].narrow(0, a, b - a).view(shape);
    if (narrow_up[i]) piece.compute = params_lp.narrow(0, a, b - a).view(shape);
    piece.decay = params[i]->decay;
    piece.requires_grad = true;
    pieces[1][i] = piece;
    if (two) pieces[1][i].grad = grads[1].narrow(0, a, b - a).view(shape);
  }
  std::vector<nn::Parameter*> ptrs;
  for (nn::Parameter& p : pieces[0]) ptrs.push_back(&p);
  inner = make_optimizer(name, ptrs, options);
  inner->set_state_home([this](size_t i, const std::string& key, const Shape& shape, DType dtype) {
    for (const auto& [k, flat] : state_flats)
      if (k == key && flat.dtype() == dtype)
        return flat.narrow(0, state_at[i], pieces[0][i].value.numel()).view(shape);
    return Tensor();  // the step counters: host scalars
  });
  for (int slot = 0; slot < 2; ++slot) bucket_pieces[slot].assign(buckets.size(), {});
  bucket_members.assign(buckets.size(), {});
  for (size_t k = 0; k < buckets.size(); ++k)
    for (size_t i : buckets[k].params) {
      if (!pieces[0][i].requires_grad) continue;
      bucket_members[k].push_back(i);
      for (int slot = 0; slot < 2; ++slot) bucket_pieces[slot][k].push_back(&pieces[slot][i]);
    }
}

}  // namespace tandem::optim
