// The recording half of the profiler (tracks, per-thread span buffers, tags, device span
// sources). It lives in the core library so that backends and the loader can record.
#include "tandem/profile/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include "tandem/error.h"

namespace tandem::profile {

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::load: return "load";
    case Stage::augment: return "augment";
    case Stage::collate: return "collate";
    case Stage::h2d: return "h2d";
    case Stage::forward: return "forward";
    case Stage::backward: return "backward";
    case Stage::optimizer: return "optimizer";
    case Stage::d2h: return "d2h";
    case Stage::wait_data: return "wait_data";
    case Stage::wait_device: return "wait_device";
    case Stage::eval: return "eval";
    case Stage::step: return "step";
    case Stage::other: return "other";
    case Stage::comm: return "comm";
    case Stage::count_: break;
  }
  return "?";
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {
struct Buffer {
  std::mutex mu;  // uncontended except while a reader copies
  std::vector<Profiler::Span> spans;
};

thread_local int t_track = -1;
thread_local Tag t_tag;
}  // namespace

struct Profiler::Impl {
  std::atomic<bool> enabled{false};
  std::atomic<bool> has_sources{false};
  mutable std::mutex mu;
  std::vector<std::unique_ptr<Buffer>> buffers;  // one per thread and one per stream track
  std::vector<Track> tracks;                     // index == track id
  std::vector<DeviceSpanSource*> sources;
};

Profiler::Profiler() : impl_(new Impl()) {}

Profiler& Profiler::global() {
  static Profiler* p = new Profiler();  // never destroyed: threads may record during exit
  return *p;
}

void Profiler::set_enabled(bool on) { impl_->enabled.store(on, std::memory_order_relaxed); }
bool Profiler::enabled() const { return impl_->enabled.load(std::memory_order_relaxed); }

void Profiler::clear() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (auto& b : impl_->buffers) {
    std::lock_guard<std::mutex> bl(b->mu);
    b->spans.clear();
  }
}

static int new_track(Profiler::Impl& impl, const std::string& name, bool is_stream) {
  std::lock_guard<std::mutex> lock(impl.mu);
  const int id = static_cast<int>(impl.tracks.size());
  impl.tracks.push_back({id, name, is_stream});
  impl.buffers.push_back(std::make_unique<Buffer>());
  return id;
}

static int this_thread_track(Profiler::Impl& impl) {
  if (t_track < 0) {
    std::ostringstream os;
    os << "thread " << std::this_thread::get_id();
    t_track = new_track(impl, os.str(), false);
  }
  return t_track;
}

void Profiler::name_this_thread(const std::string& name) {
  const int id = this_thread_track(*impl_);
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->tracks[static_cast<size_t>(id)].name = name;
}

int Profiler::stream_track(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (const Track& t : impl_->tracks)
      if (t.is_stream && t.name == name) return t.id;
  }
  return new_track(*impl_, name, true);
}

void Profiler::record_device(int track, Stage stage, const char* name, int64_t begin_ns, int64_t end_ns) {
  Buffer* b;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    TD_ASSERT(track >= 0 && track < static_cast<int>(impl_->buffers.size()));
    b = impl_->buffers[static_cast<size_t>(track)].get();
  }
  std::lock_guard<std::mutex> bl(b->mu);
  b->spans.push_back({track, stage, name, begin_ns, end_ns});
}

void Profiler::record_on(int track, Stage stage, const char* name, int64_t begin_ns, int64_t end_ns) {
  if (enabled()) record_device(track, stage, name, begin_ns, end_ns);
}

void Profiler::record(Stage stage, const char* name, int64_t begin_ns, int64_t end_ns) {
  if (!enabled()) return;
  record_device(this_thread_track(*impl_), stage, name, begin_ns, end_ns);
}

void Profiler::add_device_source(DeviceSpanSource* source) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->sources.push_back(source);
  impl_->has_sources.store(true);
}

bool Profiler::has_device_sources() const { return impl_->has_sources.load(std::memory_order_relaxed); }

void Profiler::notify_device_sources(Stage stage, const char* name, bool begin) {
  std::vector<DeviceSpanSource*> sources;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    sources = impl_->sources;
  }
  for (DeviceSpanSource* s : sources) {
    if (begin) {
      s->span_begin(stage, name);
    } else {
      s->span_end(stage, name);
    }
  }
}

std::vector<Profiler::Span> Profiler::spans() const {
  std::vector<DeviceSpanSource*> sources;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    sources = impl_->sources;
  }
  for (DeviceSpanSource* s : sources) s->collect();
  std::vector<Span> out;
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (auto& b : impl_->buffers) {
    std::lock_guard<std::mutex> bl(b->mu);
    out.insert(out.end(), b->spans.begin(), b->spans.end());
  }
  return out;
}

std::vector<Profiler::Track> Profiler::tracks() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->tracks;
}

Tag Profiler::exchange_tag(Tag tag) { return std::exchange(t_tag, tag); }

Tag current_tag() { return t_tag; }

void ScopedSpan::begin() {
  Profiler& p = Profiler::global();
  previous_ = Profiler::exchange_tag({stage_, name_});
  if (p.has_device_sources()) p.notify_device_sources(stage_, name_, true);
  begin_ = now_ns();
}

void ScopedSpan::end() {
  Profiler& p = Profiler::global();
  const int64_t end_ns = now_ns();
  if (p.has_device_sources()) p.notify_device_sources(stage_, name_, false);
  Profiler::exchange_tag(previous_);
  p.record(stage_, name_, begin_, end_ns);
}

}  // namespace tandem::profile
