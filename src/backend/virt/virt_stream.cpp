// Virt streams: a worker thread per stream runs items in order; markers complete events and
// implement waits; compute and copy items are throttled after they ran and, while the
// profiler is enabled, recorded as spans on the stream's track (consecutive items of one tag
// merged into one span).
#include "virt_stream.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace tandem::virt {

namespace {
thread_local bool worker_thread = false;
}  // namespace

bool on_virt_worker() { return worker_thread; }


using Clock = std::chrono::steady_clock;
using profile::Stage;

namespace {
int64_t to_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
}  // namespace

void VirtEvent::synchronize() {
  if (query()) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return query(); });
}

void VirtEvent::complete() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

struct VirtStream::Queue {
  enum class Kind : uint8_t { compute, copy, marker };
  struct Item {
    Kind kind = Kind::compute;
    Stage stage = Stage::other;
    const char* name = nullptr;  // profiler span name; null = not profiled
    size_t bytes = 0;
    std::function<void()> fn;
    std::shared_ptr<EventImpl> waits_for;  // markers that implement Stream::wait
    bool is_op = false;                    // an op (enqueue_op): modelled by `cost`
    OpCost cost;
    Clock::time_point enqueued{};          // ops and copies: when the host enqueued it
  };
  // A span being extended by consecutive items of the same tag (worker thread only).
  struct OpenSpan {
    Stage stage = Stage::other;
    const char* name = nullptr;
    int64_t begin = 0, end = 0;
  };

  const ThrottleState* throttle;
  std::string track_name;  // guarded by mu (set_label)
  int number;              // the stream's number on its device (0: the default stream)
  int track = -1;          // profiler track, created at the first span; guarded by mu
  OpenSpan open;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> items;
  bool stopping = false;
  std::atomic<bool> unthrottled{false};
  std::exception_ptr error;
  // Throughput planning (worker thread only): when the modelled device is done with the work
  // run so far. Kept apart from the clock so that sleep overshoot does not add up.
  Clock::time_point busy_until{};
  // Seconds the modelled device has spent on compute items (Stream::busy_seconds): an op's
  // modelled time (or its run time when longer and it ran), else the run time over `speed`.
  std::atomic<int64_t> busy_ns{0};
  Clock::time_point op_start{};  // the modelled start of the last op
  Clock::time_point ready_at{};  // when the queue's last wait (a marker on another's event) ended
  static constexpr std::chrono::microseconds kMaxAhead{500};

  Queue(const ThrottleState* t, std::string name, int n) : throttle(t), track_name(std::move(name)), number(n) {}

  void push(Item item) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!stopping) {
        if (item.kind == Kind::copy) item.enqueued = Clock::now();  // it starts no earlier
        items.push_back(std::move(item));
        cv.notify_one();
        return;
      }
    }
    run(item);  // after shutdown: inline, so that work and events still complete
  }

  // A compute item, tagged for the profiler with the enqueuing thread's tag.
  void push_compute(std::function<void()> work, bool is_op, const OpCost& cost) {
    Item item{Kind::compute, Stage::other, nullptr, 0, std::move(work), nullptr,
              is_op, cost, is_op ? Clock::now() : Clock::time_point{}};
    if (profile::Profiler::global().enabled()) {
      const profile::Tag tag = profile::current_tag();
      item.stage = tag.name ? tag.stage : Stage::other;
      item.name = tag.name ? tag.name : "device work";
    }
    push(std::move(item));
  }

  void flush_span() {
    if (!open.name) return;
    profile::Profiler& p = profile::Profiler::global();
    int t;
    {
      std::lock_guard<std::mutex> lock(mu);  // set_label may rename the track from another thread
      if (track < 0) track = p.stream_track(track_name);
      t = track;
    }
    p.record_device(t, open.stage, open.name, open.begin, open.end);
    open.name = nullptr;
  }

  void profile_item(const Item& item, int64_t begin, int64_t end) {
    if (open.name && (open.stage != item.stage || open.name != item.name)) flush_span();
    if (open.name) {
      open.end = std::max(open.end, end);
    } else {
      open = {item.stage, item.name, begin, end};
    }
  }

  // The modelled device's time: an op of modelled cost starts when it was enqueued or the
  // device finished the work before it, whichever is later; the worker sleeps only when the
  // modelled end runs more than kMaxAhead ahead of the clock. An op that ran (compute=all)
  // ends no earlier than `ran_until`.
  // Returns the op's modelled seconds.
  double model_op(const Item& item, Clock::time_point ran_until) {
    const double seconds = modelled_seconds(item.cost, throttle->tflops.load(), throttle->gbps.load());
    const bool computes = throttle->compute.load();
    op_start = std::max(busy_until, item.enqueued);
    if (seconds <= 0 && computes) return seconds;
    const auto start = op_start;
    busy_until = std::max(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)),
                          computes ? ran_until : start);
    if (!unthrottled.load() && busy_until - Clock::now() > kMaxAhead) std::this_thread::sleep_until(busy_until);
    return seconds;
  }

  void add_busy(double seconds) { busy_ns.fetch_add(static_cast<int64_t>(seconds * 1e9), std::memory_order_relaxed); }

  // Before a marker a host may be waiting on: the modelled work before it ends first.
  void settle() {
    if (!unthrottled.load() && busy_until > Clock::now()) std::this_thread::sleep_until(busy_until);
  }

  void run(Item& item) {
    const auto t0 = Clock::now();
    // compute=none: neither ops nor copies move data (the host's memcpy is not the device's
    // DMA engine and would take CPU time from the loader); copies keep their bw and latency.
    const bool skip = (item.is_op || item.kind == Kind::copy) && !throttle->compute.load();
    if (!skip) {
      try {
        item.fn();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
    }
    if (item.kind == Kind::marker || unthrottled.load()) return;
    if (item.kind == Kind::compute) {
      const auto ran = Clock::now() - t0;
      const double ran_s = skip ? 0.0 : std::chrono::duration<double>(ran).count();
      const double modelled = item.is_op ? model_op(item, Clock::now()) : 0.0;
      const double speed = throttle->speed.load();
      const double slow = !skip && speed > 0 && speed < 1 ? 1.0 / speed : 1.0;
      add_busy(modelled > 0 ? std::max(modelled, ran_s) : ran_s * slow);
      if (slow > 1) std::this_thread::sleep_for(std::chrono::duration_cast<Clock::duration>(ran * (slow - 1.0)));
    } else {
      // A copy starts when the copy before it ended in the model, or when this queue's last
      // wait ended, whichever is later (and no earlier than its enqueueing): back-to-back
      // copies then add up to their modelled time, not to that plus each sleep's overshoot.
      const double bw = throttle->bw_gbps.load();
      double seconds = throttle->latency_us.load() * 1e-6;
      if (bw > 0) seconds += static_cast<double>(item.bytes) / (bw * 1e9);
      if (seconds > 0) {
        const Clock::time_point start = std::max({busy_until, ready_at, item.enqueued});
        const Clock::time_point end =
            std::max(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)),
                     Clock::now());  // no earlier than the copy itself ran
        std::this_thread::sleep_until(end);
        busy_until = end;
      }
    }
  }

  static void worker_loop(std::shared_ptr<Queue> q) {
    worker_thread = true;
    for (;;) {
      Item item;
      bool last;
      {
        std::unique_lock<std::mutex> lock(q->mu);
        if (q->items.empty()) {
          lock.unlock();
          q->flush_span();  // going idle: the open span ends here
          lock.lock();
        }
        q->cv.wait(lock, [&] { return q->stopping || !q->items.empty(); });
        if (q->items.empty()) {  // stopping and drained
          lock.unlock();
          q->flush_span();
          return;
        }
        item = std::move(q->items.front());
        q->items.pop_front();
        last = q->items.empty();
      }
      if (item.kind == Kind::marker) {
        // A host may be waiting for this marker: record the span of the work before it first.
        if (last) q->settle();
        const bool waits = item.waits_for && !item.waits_for->query();
        if (last || waits) q->flush_span();
        q->run(item);
        if (waits) q->ready_at = Clock::now();
        continue;
      }
      int64_t begin = item.name ? profile::now_ns() : 0;
      const Clock::time_point was_busy = q->busy_until;
      q->run(item);
      // The modelled device is busy at least while the worker is (it cannot run ahead of its
      // own work), and an item's span lies where the model puts it: from when the work before
      // it ended (an op: or when it was enqueued, if later) to its modelled end.
      const int64_t start = to_ns(item.is_op ? q->op_start : was_busy);
      // (A throttled copy set its modelled end itself: its sleep's overshoot is not the device's.)
      const bool modelled_copy = item.kind == Kind::copy && !q->unthrottled.load() &&
                                 (q->throttle->bw_gbps.load() > 0 || q->throttle->latency_us.load() > 0);
      if (!modelled_copy) q->busy_until = std::max(q->busy_until, Clock::now());
      if (item.name) {
        begin = std::max(begin, start);
        q->profile_item(item, begin, std::max({profile::now_ns(), begin, to_ns(q->busy_until)}));
      }
    }
  }
};

VirtStream::VirtStream(Device device, const ThrottleState* throttle, int number)
    : device_(device),
      q_(std::make_shared<Queue>(throttle, fmt::format("{} stream {}", device.str(), number), number)),
      worker_(Queue::worker_loop, q_) {}

double VirtStream::busy_seconds() const {
  return static_cast<double>(q_->busy_ns.load(std::memory_order_relaxed)) * 1e-9;
}

void VirtStream::set_label(const std::string& label) {
  std::lock_guard<std::mutex> lock(q_->mu);
  q_->track_name = fmt::format("{} stream {} ({})", device_.str(), q_->number, label);
  q_->track = -1;
}

VirtStream::~VirtStream() {
  shutdown();
}

void VirtStream::shutdown() {
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    q_->stopping = true;
  }
  q_->unthrottled.store(true);
  q_->cv.notify_all();
  if (!worker_.joinable()) return;
  // The last handle can be dropped by a work item on the worker itself: it cannot join itself.
  // The worker keeps the queue alive and finishes draining on its own.
  if (worker_.get_id() == std::this_thread::get_id()) {
    worker_.detach();
  } else {
    worker_.join();
  }
}

void VirtStream::enqueue(std::function<void()> work) {
  q_->push_compute(std::move(work), false, {});
}

void VirtStream::enqueue_host(std::function<void()> work) {
  q_->push(Queue::Item{Queue::Kind::marker, Stage::other, nullptr, 0, std::move(work), nullptr, false, {}, {}});
}

void VirtStream::enqueue_op(std::function<void()> work, const OpCost& cost) {
  q_->push_compute(std::move(work), true, cost);
}

void VirtStream::enqueue_copy(void* dst, const void* src, size_t bytes, Stage stage) {
  const char* name = nullptr;
  if (profile::Profiler::global().enabled())
    name = stage == Stage::h2d ? "h2d copy" : stage == Stage::d2h ? "d2h copy" : "d2d copy";
  q_->push(Queue::Item{Queue::Kind::copy, stage, name, bytes,
                       [dst, src, bytes] {
                         if (bytes) std::memcpy(dst, src, bytes);
                       },
                       nullptr, false, {}, {}});
}

std::shared_ptr<EventImpl> VirtStream::record() {
  auto ev = std::make_shared<VirtEvent>();
  q_->push(Queue::Item{Queue::Kind::marker, Stage::other, nullptr, 0, [ev] { ev->complete(); }, nullptr, false, {}, {}});
  return ev;
}

void VirtStream::wait(std::shared_ptr<EventImpl> event) {
  if (event->query()) return;
  auto fn = [event] { event->synchronize(); };
  q_->push(Queue::Item{Queue::Kind::marker, Stage::other, nullptr, 0, std::move(fn), std::move(event), false, {}, {}});
}

void VirtStream::synchronize() {
  record()->synchronize();
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    std::swap(e, q_->error);
  }
  if (e) std::rethrow_exception(e);
}

}  // namespace tandem::virt
