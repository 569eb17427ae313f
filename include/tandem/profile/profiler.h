// Profiler: spans for every stage of a training step, on every thread and stream, written as
// Chrome-trace JSON (opens in Perfetto and chrome://tracing); profile/summary.h turns them into
// time per stage, data-wait share, device-idle share and one line of advice.
//
// Host spans: ScopedSpan (or record()) on the calling thread's track, named with
// name_this_thread() ("train", "loader worker 0"). Device spans: work enqueued on a device
// stream carries the enqueuing thread's current tag (the innermost ScopedSpan or TagScope);
// virt streams record the time their worker thread spent on consecutive items of one tag as
// one span on the stream's track ("virt:0 stream 1"), copies tagged h2d / d2h by direction;
// cuda records events around each ScopedSpan on the device's default stream and turns their
// elapsed times into spans when spans() is read (DeviceSpanSource).
//
// Cost: when disabled, ScopedSpan, TagScope and the stream enqueue paths do one relaxed atomic
// load and nothing else. When enabled, each thread appends to its own buffer (a mutex that only
// a reader contends for).
// Thread-safety: all functions may be called from any thread. spans(), write_chrome_trace()
// and summarize() see what was recorded so far: call them after the work (e.g. after a
// stream's synchronize(); a virt stream records its pending span before any event completes
// that a host could wait for).
// This part lives in the core library (backends and loader record into it); the Chrome-trace
// writer and the summary are in src/profile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::profile {

/// Stages of the data path and the step (see docs/design.md). `wait_data` is time the
/// training thread waits for a batch; `wait_device` time a host thread waits for a stream
/// (e.g. the prefetcher waiting for a copy to finish before reusing a slot).
enum class Stage : uint8_t {
  load,         // reading a sample from storage or memory
  augment,      // per-sample transform (crop, flip, normalize), written into the batch slot
  collate,      // assembling a batch (labels, views, bookkeeping)
  h2d,          // host-to-device copy
  forward,
  backward,
  optimizer,
  d2h,          // device-to-host copy
  wait_data,    // training thread waiting for a batch
  wait_device,  // host waiting on a device event
  eval,
  step,         // one whole training step on the training thread
  other,
  comm,         // a collective (all-reduce of a gradient bucket, broadcast) between ranks
  count_
};

const char* stage_name(Stage s);

/// Monotonic clock in nanoseconds (steady_clock).
int64_t now_ns();

/// What a thread is doing, attached to the device work it enqueues. `name` is a static string
/// (string literal); null means "no tag".
struct Tag {
  Stage stage = Stage::other;
  const char* name = nullptr;
};

/// Something that produces device spans outside the host's view (the cuda backend's timing
/// events). span_begin/span_end run on the thread of a ScopedSpan while the profiler is
/// enabled; collect() turns finished measurements into record_device() calls and runs when
/// spans are read. Implementations must be thread-safe.
class DeviceSpanSource {
 public:
  virtual ~DeviceSpanSource() = default;
  virtual void span_begin(Stage stage, const char* name) = 0;
  virtual void span_end(Stage stage, const char* name) = 0;
  virtual void collect() = 0;
};

class Profiler {
 public:
  /// The process-wide profiler.
  static Profiler& global();

  void set_enabled(bool on);
  bool enabled() const;
  /// Forgets all recorded spans (not the track names).
  void clear();

  /// Names the calling thread's track ("train", "loader worker 1"); default "thread <id>".
  void name_this_thread(const std::string& name);
  /// A track for a device stream ("virt:0 stream 1"); the same name gives the same id.
  int stream_track(const std::string& name);

  /// Records a finished span [begin_ns, end_ns) on the calling thread's track (when enabled).
  void record(Stage stage, const char* name, int64_t begin_ns, int64_t end_ns);
  /// Records a finished span on a track (when enabled).
  void record_on(int track, Stage stage, const char* name, int64_t begin_ns, int64_t end_ns);
  /// Records a device span on a stream track even if the profiler was disabled meanwhile: the
  /// work was tagged while it was enabled and finished later.
  void record_device(int track, Stage stage, const char* name, int64_t begin_ns, int64_t end_ns);

  /// Registers a source of device spans (never unregistered; the source must live forever).
  void add_device_source(DeviceSpanSource* source);

  struct Span {
    int track;
    Stage stage;
    const char* name;  // static string
    int64_t begin_ns, end_ns;
  };
  struct Track {
    int id;
    std::string name;
    bool is_stream;
  };
  /// Copies of all spans and tracks recorded so far (device sources collected first).
  std::vector<Span> spans() const;
  std::vector<Track> tracks() const;

  /// Writes Chrome-trace JSON ({"traceEvents": [...]}, "X" complete events in microseconds,
  /// pid 1 for host threads and pid 2 for device streams, one tid per track with thread_name
  /// metadata) atomically (temporary file, then rename). Throws Error(io, "[trace] ...") naming
  /// the path when it cannot be written. Defined in src/profile/chrome_trace.cpp.
  void write_chrome_trace(const std::string& path) const;

  struct Impl;  // defined in profiler.cpp

  // Used by ScopedSpan and TagScope (out of line, so the disabled path stays one load).
  static Tag exchange_tag(Tag tag);
  void notify_device_sources(Stage stage, const char* name, bool begin);
  bool has_device_sources() const;

 private:
  Profiler();
  Impl* impl_;
};

/// The calling thread's current tag (innermost ScopedSpan or TagScope while enabled).
Tag current_tag();

/// Records a span on the calling thread from construction to destruction and tags the device
/// work enqueued meanwhile (when the profiler is enabled at construction).
class ScopedSpan {
 public:
  ScopedSpan(Stage stage, const char* name) : stage_(stage), name_(name) {
    if (Profiler::global().enabled()) begin();
  }
  ~ScopedSpan() {
    if (begin_ >= 0) end();
  }
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  void begin();
  void end();
  Stage stage_;
  const char* name_;
  int64_t begin_ = -1;
  Tag previous_;
};

/// Tags the device work the calling thread enqueues, without a host span (for code whose host
/// time is not the stage's time, e.g. an asynchronous read-back).
class TagScope {
 public:
  TagScope(Stage stage, const char* name) {
    if (Profiler::global().enabled()) {
      previous_ = Profiler::exchange_tag({stage, name});
      active_ = true;
    }
  }
  ~TagScope() {
    if (active_) Profiler::exchange_tag(previous_);
  }
  TagScope(const TagScope&) = delete;
  TagScope& operator=(const TagScope&) = delete;

 private:
  Tag previous_;
  bool active_ = false;
};

}  // namespace tandem::profile

// Summary and summarize() were declared here before they moved to their own header.
#include "tandem/profile/summary.h"
