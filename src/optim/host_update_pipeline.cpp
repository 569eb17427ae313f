#include "tandem/optim/host_update_pipeline.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "tandem/error.h"
#include "tandem/profile/profiler.h"

namespace tandem::optim {

namespace {
constexpr const char* kOp = "host update";

// A profiler span over a wait, when named.
class WaitSpan {
 public:
  explicit WaitSpan(const char* name) {
    if (name) span_.emplace(profile::Stage::wait_device, name);
  }

 private:
  std::optional<profile::ScopedSpan> span_;
};
}  // namespace

HostUpdatePipeline::HostUpdatePipeline(HostUpdateOptions options, HostUpdateHooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)) {
  TD_CHECK_ARG(options_.units >= 0, kOp, "units must be >= 0, got {}", options_.units);
  TD_CHECK_ARG(options_.delay == 0 || options_.delay == 1, kOp, "delay must be 0 or 1, got {}", options_.delay);
  TD_CHECK_ARG(options_.delay_warmup_steps >= 0, kOp, "delay_warmup_steps must be >= 0, got {}",
               options_.delay_warmup_steps);
  TD_CHECK_ARG(static_cast<bool>(hooks_.update), kOp, "expected an update hook");
  const auto n = static_cast<size_t>(options_.units);
  owed_.assign(n, 0);
  queued_in_step_.assign(n, 0);
  grads_.assign(n, Event());
  pending_.assign(n, 0);
  uploaded_.assign(n, 0);
  upload_events_.assign(n, Event());
  thread_ = std::make_unique<HostUpdateThread>(options_.thread_name, options_.num_threads);
}

HostUpdatePipeline::~HostUpdatePipeline() { stop(); }

void HostUpdatePipeline::stop() noexcept { thread_->stop(); }

int HostUpdatePipeline::queued_in_step_count() const {
  return static_cast<int>(std::count(queued_in_step_.begin(), queued_in_step_.end(), 1));
}

Event HostUpdatePipeline::upload_event(int unit) const {
  Event e;
  thread_->locked([&] { e = upload_events_[static_cast<size_t>(unit)]; });
  return e;
}

bool HostUpdatePipeline::upload_pending() const {
  return std::any_of(owed_.begin(), owed_.end(), [](char c) { return c != 0; });
}

void HostUpdatePipeline::upload(int unit, const Event& gate, int64_t step) {
  const Event e = hooks_.upload(unit, gate, step);
  thread_->locked([&] {
    upload_events_[static_cast<size_t>(unit)] = e;
    uploaded_[static_cast<size_t>(unit)] = step;
  });
}

void HostUpdatePipeline::queue(HostUpdate u, const Event& gate) {
  const auto k = static_cast<size_t>(u.unit);
  const bool uploads = static_cast<bool>(hooks_.upload);
  const bool upload_now = uploads && delay_of(u.step) == 0;
  const bool upload_previous = owed_[k] != 0;
  owed_[k] = uploads && !upload_now;
  grads_[k] = u.grads;
  queued_in_step_[k] = 1;
  thread_->locked([&] { ++pending_[k]; });
  thread_->push([this, u = std::move(u), gate, upload_now, upload_previous](bool skip) {
    const auto k = static_cast<size_t>(u.unit);
    try {
      if (!skip) {
        if (upload_previous) upload(u.unit, gate, u.step - 1);
        u.grads.synchronize();
        upload_event(u.unit).synchronize();  // the last upload read the values the update rewrites
        hooks_.update(u);
        if (upload_now) upload(u.unit, Event(), u.step);
      }
    } catch (...) {
      thread_->fail(std::current_exception());  // before its waiters see that it ran
    }
    thread_->locked([&] { --pending_[k]; });
  });
}

void HostUpdatePipeline::queue_check(std::function<std::vector<int>()> check, int64_t step) {
  const bool upload_now = static_cast<bool>(hooks_.upload) && delay_of(step) == 0;
  thread_->locked([&] {
    for (int64_t& n : pending_) ++n;
  });
  thread_->push([this, check = std::move(check), step, upload_now](bool skip) {
    try {
      if (!skip) {
        const std::vector<int> changed = check();
        if (upload_now)
          for (int unit : changed) {
            upload_event(unit).synchronize();  // the speculative upload has read the values first
            upload(unit, Event(), step);
          }
      }
    } catch (...) {
      thread_->fail(std::current_exception());
    }
    thread_->locked([&] {
      for (int64_t& n : pending_) --n;
    });
  });
}

void HostUpdatePipeline::upload_owed(const Event& gate, int64_t step) {
  for (size_t k = 0; k < owed_.size(); ++k) {
    if (!owed_[k]) continue;
    owed_[k] = 0;
    thread_->push([this, unit = static_cast<int>(k), gate, step](bool skip) {
      if (!skip) upload(unit, gate, step);
    });
  }
}

void HostUpdatePipeline::reset_uploads(int64_t step, bool pending) {
  thread_->locked([&] { std::fill(uploaded_.begin(), uploaded_.end(), pending ? step - 1 : step); });
  std::fill(owed_.begin(), owed_.end(), pending ? 1 : 0);
}

bool HostUpdatePipeline::updating(int unit) const {
  bool pending = false;
  thread_->locked([&] { pending = pending_[static_cast<size_t>(unit)] > 0; });
  return pending;
}

void HostUpdatePipeline::wait_unit(int unit, const char* span) {
  if (!updating(unit)) return;
  const WaitSpan s(span);
  thread_->wait([&] { return pending_[static_cast<size_t>(unit)] == 0; }, false);
}

bool HostUpdatePipeline::all(const std::function<bool(size_t)>& unit_ready) const {
  for (size_t k = 0; k < pending_.size(); ++k)
    if (!unit_ready(k)) return false;
  return true;
}

void HostUpdatePipeline::raise(std::exception_ptr error) {
  if (!options_.keep_errors) error = thread_->take_error();
  if (error) std::rethrow_exception(error);
}

void HostUpdatePipeline::wait_updates(const char* span) {
  std::exception_ptr error;
  {
    const WaitSpan s(span);
    error = thread_->wait([&] { return all([&](size_t k) { return pending_[k] == 0; }); }, options_.keep_errors);
  }
  raise(error);
}

void HostUpdatePipeline::finish_step(int64_t step, const char* span) {
  if (delay_of(step) == 0) {
    wait_updates(span);
  } else if (hooks_.upload) {  // the next forward needs the previous update uploaded
    const int64_t target = step - 1;
    std::exception_ptr error;
    {
      const WaitSpan s(span);
      error = thread_->wait([&] { return all([&](size_t k) { return uploaded_[k] >= target; }); },
                            options_.keep_errors);
    }
    raise(error);
  } else {
    check();
  }
  std::fill(queued_in_step_.begin(), queued_in_step_.end(), 0);
}

void HostUpdatePipeline::wait_idle() {
  thread_->wait_idle();
  raise(thread_->error());
}

void HostUpdatePipeline::check() { raise(thread_->error()); }

void HostUpdatePipeline::run(std::function<void()> work) {
  const int64_t n = ++runs_queued_;
  thread_->push([this, work = std::move(work), n](bool skip) {
    try {
      if (!skip) work();
    } catch (...) {
      thread_->fail(std::current_exception());
    }
    thread_->locked([&] { runs_done_ = n; });
  });
  raise(thread_->wait([&] { return runs_done_ >= n; }, false));
}

}  // namespace tandem::optim
