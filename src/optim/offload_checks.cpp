// OffloadOptimizer's checks of a step (OffloadOptions::loss_scale, clip_grad_norm, speculate):
// the host unscale and inf/NaN check of each bucket, and after the step's last bucket the
// global norm and the verdict, which keeps the speculative updates or restores them (and
// updates again from the clipped gradients).
#include <cmath>

#include "optim/offload_impl.h"
#include "tandem/optim/loss_scaler.h"

namespace tandem::optim {

void OffloadOptimizer::Impl::unscale_bucket(int k, int slot) {
  const OffloadBucket& b = buckets[static_cast<size_t>(k)];
  const bool bad = unscale_check_host(f32(grads[slot]) + b.begin, b.end - b.begin, f32(scale_host[slot])[ops::kScale]);
  found[static_cast<size_t>(k)] = bad ? 1 : 0;
}

std::vector<int> OffloadOptimizer::Impl::check_step(int slot, double lr, int64_t step) {
  const int64_t t0 = prof::Profiler::global().enabled() ? prof::now_ns() : -1;
  bool inf = false;
  for (char& f : found) {
    inf = inf || f != 0;
    f = 0;
  }
  bool bites = false;
  if (!inf && clip > 0) {
    std::vector<Tensor> gs;  // every member's gradient, in parameter order (the resident update's)
    for (size_t i = 0; i < params.size(); ++i)
      if (offset[i] >= 0) gs.push_back(grads[slot].narrow(0, offset[i], numel(i)));
    Tensor norm = Tensor::empty({1});
    ops::clip_grad_norm_(gs, clip, norm);
    const float n = norm.data<float>()[0];
    grad_norm = n;
    bites = static_cast<float>(clip) / (n + 1e-6f) < 1.0f;  // clip_grad_norm_ scaled the gradients
  }
  skipped = inf;
  std::vector<int> changed;
  for (size_t k = 0; k < buckets.size(); ++k) {
    const int unit = static_cast<int>(k);
    if (speculate && !inf && !bites) break;  // the speculative updates stand
    if (!speculate && inf) continue;          // nothing was updated
    pipeline->upload_event(unit).synchronize();  // the last upload has read the master copy
    if (speculate) {
      inner->restore_part(bucket_members[k], bucket_pieces[slot][k]);
      changed.push_back(unit);
      if (inf) continue;  // skipped: the restored values go up again
    } else if (before_update) {
      before_update(unit, step);
    }
    HostUpdate job;
    job.unit = unit;
    job.step = step;
    job.lr = lr;
    job.slot = slot;
    run_kernels(job);
    if (!speculate) changed.push_back(unit);
  }
  if (t0 >= 0)
    prof::Profiler::global().record(prof::Stage::optimizer, "cpu update: check", t0, prof::now_ns());
  return changed;
}

bool OffloadOptimizer::last_step_skipped() const { return impl_->skipped.load(); }
float OffloadOptimizer::last_grad_norm() const { return impl_->grad_norm.load(); }

}  // namespace tandem::optim
