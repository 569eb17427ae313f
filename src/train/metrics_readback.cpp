#include "train/metrics_readback.h"

#include <cmath>

#include "tandem/amp_ops.h"
#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/pinned.h"
#include "tandem/profile/profiler.h"

namespace tandem::train {

MetricsReadback::MetricsReadback(Device device, Stream stream, int64_t interval)
    : device_(device), stream_(std::move(stream)), interval_(interval) {
  acc_ = Tensor::empty({4}, DType::f32, device);
  ops::zero_(acc_);
  // [0, 4): the accumulator; [4, 8): the loss scaler's state when there is one.
  for (Slot& slot : slots_) slot.host = device.is_host() ? Tensor::zeros({8}) : pinned_empty({8});
}

MetricsReadback::~MetricsReadback() {
  for (Slot& slot : slots_) slot.copied.synchronize();  // copies into our pinned slots
}

void MetricsReadback::step_done(int64_t step, std::deque<Window>& done) {
  if (step % interval_ != 0) return;
  issue(window_first_, step, done);
  window_first_ = step + 1;
}

void MetricsReadback::finish(int64_t steps, std::deque<Window>& done) {
  if (window_first_ <= steps) issue(window_first_, steps, done);
  while (!pending_.empty()) wait_oldest(done);
}

void MetricsReadback::wait_all(std::deque<Window>& done) {
  while (!pending_.empty()) wait_oldest(done);
}

void MetricsReadback::resume_at(int64_t step, const std::vector<float>& values) {
  window_first_ = step / interval_ * interval_ + 1;
  if (values.empty()) return;
  TD_CHECK(values.size() == 4, ErrorCode::internal, "train", "metrics accumulator: expected 4 values, got {}",
           values.size());
  const Tensor host = Tensor::from_vector({4}, values);
  runtime_for(device_).copy_async(acc_.raw_data(), device_, host.raw_data(), Device{}, acc_.nbytes(), stream_);
  stream_.synchronize();
}

void MetricsReadback::poll(std::deque<Window>& done) {
  while (!pending_.empty() && slots_[pending_.front().slot].copied.query()) take(done);
}

// Enqueues the read-back of steps [first_step, last_step] and clears the accumulator, then
// waits (host) for the read-back issued before this one if it is still in flight.
void MetricsReadback::issue(int64_t first_step, int64_t last_step, std::deque<Window>& done) {
  TD_ASSERT(pending_.size() < slots_.size());
  const size_t k = next_slot_;
  next_slot_ = (next_slot_ + 1) % slots_.size();
  Slot& slot = slots_[k];
  runtime_for(device_).copy_async(slot.host.raw_data(), Device{}, acc_.raw_data(), device_, acc_.nbytes(), stream_);
  if (scaler_state_.defined())
    runtime_for(device_).copy_async(static_cast<float*>(slot.host.raw_data()) + 4, Device{}, scaler_state_.raw_data(),
                                    device_, scaler_state_.nbytes(), stream_);
  slot.copied = stream_.record();
  ops::zero_(acc_);
  pending_.push_back({k, first_step, last_step});
  while (pending_.size() > 1) wait_oldest(done);
}

// Waits for the oldest read-back in flight and moves it into `done`.
void MetricsReadback::wait_oldest(std::deque<Window>& done) {
  if (pending_.empty()) return;
  const Event& copied = slots_[pending_.front().slot].copied;
  if (!copied.query()) {
    const int64_t t0 = profile::now_ns();
    copied.synchronize();
    profile::Profiler::global().record(profile::Stage::wait_device, "metrics read-back", t0, profile::now_ns());
  }
  take(done);
}

void MetricsReadback::take(std::deque<Window>& done) {
  const Pending p = pending_.front();
  pending_.pop_front();
  const float* m = static_cast<const float*>(slots_[p.slot].host.raw_data());
  Window w{p.first_step, p.last_step, m[0], std::llround(m[1]), std::llround(m[2]), std::llround(m[3])};
  if (scaler_state_.defined()) {
    w.has_scaler = true;
    w.scale = m[4 + ops::kScale];
    w.skipped_steps = std::llround(m[4 + ops::kSkippedSteps]);
  }
  done.push_back(w);
}

}  // namespace tandem::train
