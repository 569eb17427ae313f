// CUDA streams and events, and the profiler's device spans on cuda (events with timing
// around each ScopedSpan on the default stream of the calling thread's current device).
#include "backend/cuda/cuda_stream.h"

#include <array>
#include <atomic>
#include <utility>

#include <fmt/format.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/deferred_release.h"
#include "tandem/error.h"
#include "tandem/profile/profiler.h"

namespace tandem::cuda_detail {
namespace {

// Best effort: a ScopedSpan records an event with timing on the default stream of the current
// device at its start and end; collect() (run when the profiler's spans are read) waits for the
// end events and places each pair on the host clock through an anchor event per device whose
// host time was taken right after the GPU reached it (cudaEventElapsedTime, 0.5 us
// resolution; float milliseconds lose precision after tens of minutes of profiling). Work
// enqueued on other streams is not covered. CUDA errors only drop spans.
class CudaSpanTimer final : public profile::DeviceSpanSource {
 public:
  static constexpr int kMaxDevices = 64;

  static CudaSpanTimer& get() {
    static CudaSpanTimer* t = [] {
      auto* timer = new CudaSpanTimer();  // never destroyed: the profiler keeps a pointer
      profile::Profiler::global().add_device_source(timer);
      return timer;
    }();
    return *t;
  }

  // A device whose state (and default stream) exists: spans may use it.
  void device_ready(int device) {
    if (device >= 0 && device < kMaxDevices) ready_.fetch_or(uint64_t{1} << device);
  }

  void span_begin(profile::Stage, const char*) override {
    Open o;
    int dev = -1;
    if (cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < kMaxDevices && (ready_.load() >> dev & 1)) {
      cudaStream_t s = device_state(dev).default_stream->get();
      if (anchor(dev, s) && cudaEventCreate(&o.begin) == cudaSuccess) {
        if (cudaEventRecord(o.begin, s) == cudaSuccess) {
          o.device = dev;
        } else {
          cudaEventDestroy(o.begin);
        }
      }
    }
    cudaGetLastError();
    open_.push_back(o);  // also when skipped: begin and end pair up by nesting
  }

  void span_end(profile::Stage stage, const char* name) override {
    if (open_.empty()) return;
    const Open o = open_.back();
    open_.pop_back();
    if (o.device < 0) return;
    cudaEvent_t end = nullptr;
    DeviceGuard guard(o.device);
    if (cudaEventCreate(&end) != cudaSuccess ||
        cudaEventRecord(end, device_state(o.device).default_stream->get()) != cudaSuccess) {
      if (end) cudaEventDestroy(end);
      cudaEventDestroy(o.begin);
      cudaGetLastError();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    done_.push_back({o.device, o.begin, end, stage, name});
  }

  void collect() override {
    std::vector<Done> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done.swap(done_);
    }
    profile::Profiler& p = profile::Profiler::global();
    for (const Done& d : done) {
      DeviceGuard guard(d.device);
      const Anchor& a = anchors_[static_cast<size_t>(d.device)];
      float b_ms = 0, e_ms = 0;
      if (cudaEventSynchronize(d.end) == cudaSuccess && cudaEventElapsedTime(&b_ms, a.event, d.begin) == cudaSuccess &&
          cudaEventElapsedTime(&e_ms, a.event, d.end) == cudaSuccess) {
        p.record_device(a.track, d.stage, d.name, a.host_ns + static_cast<int64_t>(b_ms * 1e6),
                        a.host_ns + static_cast<int64_t>(e_ms * 1e6));
      }
      cudaEventDestroy(d.begin);
      cudaEventDestroy(d.end);
      cudaGetLastError();
    }
  }

 private:
  struct Open {
    int device = -1;
    cudaEvent_t begin = nullptr;
  };
  struct Done {
    int device;
    cudaEvent_t begin, end;
    profile::Stage stage;
    const char* name;
  };
  struct Anchor {
    cudaEvent_t event = nullptr;
    int64_t host_ns = 0;
    int track = -1;
  };

  // The device's anchor event, made once (the host waits for the GPU to reach it).
  bool anchor(int dev, cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mu_);
    Anchor& a = anchors_[static_cast<size_t>(dev)];
    if (a.event) return true;
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) return false;
    if (cudaEventRecord(e, s) != cudaSuccess || cudaEventSynchronize(e) != cudaSuccess) {
      cudaEventDestroy(e);
      return false;
    }
    a.host_ns = profile::now_ns();
    a.track = profile::Profiler::global().stream_track(fmt::format("cuda:{} default stream", dev));
    a.event = e;
    return true;
  }

  std::atomic<uint64_t> ready_{0};
  std::mutex mu_;
  std::vector<Done> done_;
  std::array<Anchor, kMaxDevices> anchors_{};
  static thread_local std::vector<Open> open_;
};

thread_local std::vector<CudaSpanTimer::Open> CudaSpanTimer::open_;

}  // namespace

namespace {

// Events of each device for reuse: every op records one for its outputs, and creating and
// destroying one per op would cost two more driver calls each time. An event goes back here
// only when no CudaEvent holds it; re-recording it then is safe, since a cudaStreamWaitEvent
// already enqueued captured the work it stood for. Never destroyed (events may outlive main).
class EventCache {
 public:
  static EventCache& get() {
    static EventCache* c = new EventCache();
    return *c;
  }
  cudaEvent_t take(int device) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& v = free_[static_cast<size_t>(device)];
      if (!v.empty()) {
        cudaEvent_t e = v.back();
        v.pop_back();
        return e;
      }
    }
    cudaEvent_t e = nullptr;
    TD_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void give(int device, cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& v = free_[static_cast<size_t>(device)];
    if (v.size() < kKeep) {
      v.push_back(e);
      return;
    }
    cudaEventDestroy(e);  // errors ignored: may run after CUDA shut down
  }

 private:
  static constexpr size_t kKeep = 1024;  // per device; more are destroyed
  std::mutex mu_;
  std::array<std::vector<cudaEvent_t>, CudaSpanTimer::kMaxDevices> free_;
};

}  // namespace

CudaEvent::CudaEvent(int device, cudaStream_t stream) : device_(device), stream_(stream) {
  DeviceGuard guard(device_);
  event_ = EventCache::get().take(device_);
  const cudaError_t err = cudaEventRecord(event_, stream);
  if (err != cudaSuccess) {
    cudaEventDestroy(event_);
    event_ = nullptr;
    throw_cuda_error("cudaEventRecord(event, stream)", err);
  }
}

CudaEvent::~CudaEvent() {
  if (event_) EventCache::get().give(device_, event_);
}

bool CudaEvent::query() const {
  const cudaError_t err = cudaEventQuery(event_);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  throw_cuda_error("cudaEventQuery(event)", err);
}

void CudaEvent::synchronize() { TD_CUDA(cudaEventSynchronize(event_)); }

namespace {

// The process-wide release thread of finished host work (never destroyed: streams and their
// callbacks may outlive main). Started by the first stream, before any callback can run.
DeferredRelease& host_release() {
  static DeferredRelease* r = new DeferredRelease();
  return *r;
}

}  // namespace

CudaStream::CudaStream(int device, int priority) : device_(device) {
  host_release();
  DeviceGuard guard(device_);
  if (priority == 0) {
    TD_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  } else {
    TD_CUDA(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
  }
  // The device's state exists once its first stream (the default one) does.
  CudaSpanTimer::get().device_ready(device_);
}

CudaStream::~CudaStream() {
  if (stream_) cudaStreamDestroy(stream_);  // returns at once; queued work still completes
}

namespace {

// One enqueued work item. Everything it owns (the closure and its captures, the error, the
// reference to the stream's error slot) is destroyed on the release thread, never inside
// CUDA's callback.
struct HostWork {
  std::function<void()> work;
  std::shared_ptr<CudaStream::ErrorSlot> errors;
  std::exception_ptr error;
};

void run_host_work(void* arg) {
  std::unique_ptr<HostWork> w(static_cast<HostWork*>(arg));
  try {
    w->work();
  } catch (...) {
    w->error = std::current_exception();
  }
  if (w->error) {
    std::lock_guard<std::mutex> lock(w->errors->mu);
    if (!w->errors->first) w->errors->first = w->error;
  }
  host_release().hand_over(std::move(w));
}

}  // namespace

void CudaStream::enqueue(std::function<void()> work) {
  auto w = std::make_unique<HostWork>(HostWork{std::move(work), errors_, nullptr});
  DeviceGuard guard(device_);
  TD_CUDA(cudaLaunchHostFunc(stream_, run_host_work, w.get()));
  w.release();  // owned by the callback now
}

std::shared_ptr<EventImpl> CudaStream::record() { return std::make_shared<CudaEvent>(device_, stream_); }

void CudaStream::wait(std::shared_ptr<EventImpl> event) {
  if (auto* ce = dynamic_cast<CudaEvent*>(event.get())) {
    DeviceGuard guard(device_);
    TD_CUDA(cudaStreamWaitEvent(stream_, ce->get(), 0));
    return;
  }
  if (event->query()) return;
  // An event of another device kind (virt, a host event): a host function in stream order
  // holds back later work until it completed.
  enqueue([event] { event->synchronize(); });
}

void CudaStream::synchronize() {
  {
    DeviceGuard guard(device_);
    TD_CUDA(cudaStreamSynchronize(stream_));
  }
  // The host functions have returned; what they handed over is released before this returns
  // (pool statistics and storages then reflect the finished work).
  host_release().flush();
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(errors_->mu);
    e = std::exchange(errors_->first, nullptr);
  }
  if (e) std::rethrow_exception(e);
}

CudaStream& as_cuda_stream(const Stream& stream, const char* op) {
  TD_CHECK_ARG(static_cast<bool>(stream), op, "no stream given: expected a cuda stream");
  auto* cs = dynamic_cast<CudaStream*>(stream.impl());
  TD_CHECK_ARG(cs != nullptr, op, "expected a cuda stream, got a stream of {}", stream.device().str());
  return *cs;
}

}  // namespace tandem::cuda_detail
