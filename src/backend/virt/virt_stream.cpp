// Virt streams: a worker thread per stream runs items in order; markers complete events and
// implement waits; compute and copy items are throttled after they ran.
#include "virt_stream.h"

#include <chrono>
#include <cstring>

namespace tandem::virt {

using Clock = std::chrono::steady_clock;

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
    size_t bytes = 0;
    std::function<void()> fn;
  };

  const ThrottleState* throttle;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> items;
  bool stopping = false;
  std::atomic<bool> unthrottled{false};
  std::exception_ptr error;

  explicit Queue(const ThrottleState* t) : throttle(t) {}

  void push(Item item) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!stopping) {
        items.push_back(std::move(item));
        cv.notify_one();
        return;
      }
    }
    run(item);  // after shutdown: inline, so that work and events still complete
  }

  void run(Item& item) {
    const auto t0 = Clock::now();
    try {
      item.fn();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
    if (item.kind == Kind::marker || unthrottled.load()) return;
    if (item.kind == Kind::compute) {
      const double speed = throttle->speed.load();
      if (speed > 0 && speed < 1) {
        const auto ran = Clock::now() - t0;
        std::this_thread::sleep_for(
            std::chrono::duration_cast<Clock::duration>(ran * (1.0 / speed - 1.0)));
      }
    } else {
      const double bw = throttle->bw_gbps.load();
      double seconds = throttle->latency_us.load() * 1e-6;
      if (bw > 0) seconds += static_cast<double>(item.bytes) / (bw * 1e9);
      if (seconds > 0) {
        std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(seconds)));
      }
    }
  }

  static void worker_loop(std::shared_ptr<Queue> q) {
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(q->mu);
        q->cv.wait(lock, [&] { return q->stopping || !q->items.empty(); });
        if (q->items.empty()) return;  // stopping and drained
        item = std::move(q->items.front());
        q->items.pop_front();
      }
      q->run(item);
    }
  }
};

VirtStream::VirtStream(Device device, const ThrottleState* throttle)
    : device_(device), q_(std::make_shared<Queue>(throttle)), worker_(Queue::worker_loop, q_) {}

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
  q_->push(Queue::Item{Queue::Kind::compute, 0, std::move(work)});
}

void VirtStream::enqueue_copy(void* dst, const void* src, size_t bytes) {
  q_->push(Queue::Item{Queue::Kind::copy, bytes, [dst, src, bytes] {
                         if (bytes) std::memcpy(dst, src, bytes);
                       }});
}

std::shared_ptr<EventImpl> VirtStream::record() {
  auto ev = std::make_shared<VirtEvent>();
  q_->push(Queue::Item{Queue::Kind::marker, 0, [ev] { ev->complete(); }});
  return ev;
}

void VirtStream::wait(std::shared_ptr<EventImpl> event) {
  if (event->query()) return;
  q_->push(
      Queue::Item{Queue::Kind::marker, 0, [event = std::move(event)] { event->synchronize(); }});
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
