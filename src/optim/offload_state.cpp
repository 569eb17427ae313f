// OffloadOptimizer: saving and restoring the host state (moments, step count, master copy).
#include "tandem/optim/offload.h"

#include <algorithm>

#include "optim/offload_impl.h"

namespace tandem::optim {

void OffloadOptimizer::finish_host_updates() {
  Impl& m = *impl_;
  m.pipeline->check();
  TD_CHECK_ARG(m.pipeline->queued_in_step_count() == 0, kOp,
               "finish_host_updates() called between a backward() that launched gradient copies and its step()");
  m.pipeline->wait_idle();
}

void OffloadOptimizer::write_master_values() {
  Impl& m = *impl_;
  TD_CHECK(!m.low() || !upload_pending(), ErrorCode::not_available, kOp,
           "write_master_values() while a delayed upload is pending in {}: the device's {} copies are one update "
           "behind the master copy; call flush() first",
           dtype_name(m.lp), dtype_name(m.lp));
  finish_host_updates();
  m.write_values();
}

bool OffloadOptimizer::upload_pending() const {
  return impl_->pipeline->upload_pending();
}

std::vector<nn::NamedTensor> OffloadOptimizer::state() const {
  Impl& m = *impl_;
  m.check_unsharded("state()");
  const uint64_t in_flight = m.pipeline->in_flight();
  TD_CHECK_ARG(in_flight == 0, kOp,
               "state() while {} bucket updates are in flight: call flush() or finish_host_updates() first",
               in_flight);
  const bool pending = upload_pending();
  std::vector<nn::NamedTensor> out;
  if (step_count() == 0) return out;
  if (m.disk) m.disk->acquire_all();  // the views below read every bucket's state
  auto view = [&](const Tensor& flat, size_t i) {
    return flat.narrow(0, m.offset[i], m.numel(i)).view(m.params[i]->value.shape());
  };
  out = m.inner->state();  // views into the flat state buffers; the step counters
  if (pending)
    for (size_t i = 0; i < m.params.size(); ++i)
      if (m.offset[i] >= 0) out.push_back({param_name(i) + ".master", view(m.master, i), false});
  return out;
}

std::vector<OffloadOptimizer::StateSlice> OffloadOptimizer::state_slices() const {
  Impl& m = *impl_;
  const uint64_t in_flight = m.pipeline->in_flight();
  TD_CHECK_ARG(in_flight == 0, kOp,
               "state_slices() while {} bucket updates are in flight: call finish_host_updates() first", in_flight);
  TD_CHECK(!upload_pending(), ErrorCode::not_available, kOp,
           "state_slices() while a delayed upload is pending: its master copy is not part of the slices");
  std::vector<StateSlice> out;
  if (step_count() == 0) return out;
  const auto keys = state_keys();
  for (const nn::NamedTensor& nt : m.inner->state()) {
    bool found = false;
    for (size_t i = 0; i < m.params.size() && !found; ++i)
      for (const auto& [key, dtype] : keys) {
        if (nt.name != param_name(i) + "." + key) continue;
        const int64_t begin = key == "step" ? 0 : m.piece_range(i).first;
        out.push_back({nt.name, begin, nt.tensor.view({nt.tensor.numel()})});
        found = true;
        break;
      }
    TD_CHECK(found, ErrorCode::internal, kOp, "state '{}' matches no parameter", nt.name);
  }
  return out;
}

void OffloadOptimizer::load_state(const std::vector<nn::NamedTensor>& state, int64_t step_count) {
  Impl& m = *impl_;
  TD_CHECK_ARG(step_count >= 0, kOp, "step_count must be >= 0, got {}", step_count);
  // Sharded (ZeRO-1): the whole state's entries cut to this rank's pieces (flat, as the inner
  // optimizer holds them); entries of parameters with no elements here are dropped.
  const auto cut_to_pieces = [&]() {
    std::vector<nn::NamedTensor> out;
    const auto keys = this->state_keys();
    for (const nn::NamedTensor& nt : state) {
      bool found = false;
      for (size_t i = 0; i < m.params.size() && !found; ++i) {
        if (m.offset[i] < 0) continue;
        for (const auto& [key, dtype] : keys) {
          if (nt.name != this->param_name(i) + "." + key) continue;
          found = true;
          const auto [begin, len] = m.piece_range(i);
          if (len == 0) break;
          if (key == "step") {
            out.push_back(nt);
            break;
          }
          TD_CHECK_ARG(nt.tensor.defined() && nt.tensor.shape() == m.params[i]->value.shape() &&
                           nt.tensor.device().is_host() && nt.tensor.is_contiguous(),
                       kOp, "state '{}': expected a host tensor of shape {}", nt.name,
                       shape_str(m.params[i]->value.shape()));
          out.push_back({nt.name, nt.tensor.view({nt.tensor.numel()}).narrow(0, begin, len).clone(), false});
          break;
        }
      }
      TD_CHECK_ARG(found, kOp, "state '{}' matches no parameter and key of this optimizer{}", nt.name,
                   nt.name.size() > 7 && nt.name.compare(nt.name.size() - 7, 7, ".master") == 0
                       ? " (a pending upload's master copy cannot be sharded)"
                       : "");
    }
    return out;
  };
  if (m.sharded()) {
    std::vector<nn::NamedTensor> slots = cut_to_pieces();
    flush_uploads();
    const auto keys = state_keys();
    const bool counted = std::any_of(keys.begin(), keys.end(), [](const auto& k) { return k.first == "step"; });
    for (size_t i = 0; counted && i < m.params.size(); ++i) {
      const std::string step = param_name(i) + ".step";
      if (m.piece_range(i).second == 0 ||
          std::any_of(slots.begin(), slots.end(), [&](const nn::NamedTensor& t) { return t.name == step; }))
        continue;
      Tensor n = Tensor::empty({}, DType::i64);
      *n.data<int64_t>() = step_count;
      slots.push_back({step, n, false});
    }
    m.inner->load_state(slots, step_count);
    set_step_count(step_count);
    m.pipeline->reset_uploads(step_count, false);
    m.read_master();
    return;
  }
  flush_uploads();  // not flush(): the device values are the restored ones, read below
  if (m.disk) m.disk->acquire_all();  // the optimizer's load writes every bucket's state
  struct Target {
    Tensor dst;
    const Tensor* src;
  };
  std::vector<Target> masters;         // the pending upload's parameters
  std::vector<nn::NamedTensor> slots;  // the optimizer's own (moments, momentum, step counters)
  auto keys = state_keys();
  keys.emplace_back("master", DType::f32);
  const bool counted = std::any_of(keys.begin(), keys.end(), [](const auto& k) { return k.first == "step"; });
  std::vector<char> has_step(m.params.size(), 0);
  const auto moment = [](DType d) { return d == DType::f32 || d == DType::bf16; };
  for (const nn::NamedTensor& nt : state) {
    bool found = false;
    for (size_t i = 0; i < m.params.size() && !found; ++i) {
      if (m.offset[i] < 0) continue;
      for (const auto& [key, dtype] : keys) {
        if (nt.name != param_name(i) + "." + key) continue;
        const Shape want = dtype == DType::i64 ? Shape{} : m.params[i]->value.shape();
        // Moments saved in the other of f32 / bf16 are converted by the optimizer's load_state.
        const bool dtype_ok =
            nt.tensor.defined() &&
            (nt.tensor.dtype() == dtype || (key != "master" && moment(dtype) && moment(nt.tensor.dtype())));
        TD_CHECK_ARG(dtype_ok && nt.tensor.shape() == want && nt.tensor.device().is_host() && nt.tensor.is_contiguous(),
                     kOp, "state '{}': expected a {} host tensor of shape {}, got {} {}", nt.name, dtype_name(dtype),
                     shape_str(want), nt.tensor.defined() ? dtype_name(nt.tensor.dtype()) : "undefined",
                     nt.tensor.defined() ? shape_str(nt.tensor.shape()) : "");
        if (key == "step") {
          TD_CHECK_ARG(nt.tensor.item() == static_cast<double>(step_count), kOp,
                       "state '{}': step {} differs from step_count {} (one count for all parameters)", nt.name,
                       nt.tensor.item(), step_count);
          has_step[i] = 1;
        }
        if (key == "master") {
          masters.push_back({m.master.narrow(0, m.offset[i], m.numel(i)).view(want), &nt.tensor});
        } else {
          slots.push_back(nt);
        }
        found = true;
        break;
      }
    }
    TD_CHECK_ARG(found, kOp, "state '{}' matches no parameter and key of this optimizer", nt.name);
  }
  const size_t members = static_cast<size_t>(std::count_if(m.offset.begin(), m.offset.end(), [](int64_t o) { return o >= 0; }));
  TD_CHECK_ARG(masters.empty() || (masters.size() == members && step_count >= 1), kOp,
               "state holds '.master' entries for {} of {} parameters at step_count {}: a pending upload needs "
               "one for every parameter and step_count >= 1",
               masters.size(), members, step_count);
  // Every member is updated at every step: its own count (Adam's bias corrections) is step_count.
  if (counted)
    for (size_t i = 0; i < m.params.size(); ++i)
      if (m.offset[i] >= 0 && !has_step[i]) {
        Tensor n = Tensor::empty({}, DType::i64);
        *n.data<int64_t>() = step_count;
        slots.push_back({param_name(i) + ".step", n, false});
      }
  m.inner->load_state(slots, step_count);
  set_step_count(step_count);
  // With a pending upload, the device holds the parameters of update step_count - 1: the
  // next step uploads the master copy (update step_count) as the uninterrupted run would.
  m.pipeline->reset_uploads(step_count, !masters.empty());
  m.read_master();
  for (Target& t : masters) t.dst.copy_from(*t.src);
  if (m.disk) m.disk->release_all();
}

}  // namespace tandem::optim
