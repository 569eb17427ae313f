// Profiler: spans for every stage of a training step, on every thread and stream, written as
// Chrome-trace JSON (opens in Perfetto and chrome://tracing) and summarised as time per stage,
// data-wait share, device-idle share and one line of advice naming the limiting stage.
//
// Recording is cheap when disabled (one relaxed atomic load) and lock-free when enabled: each
// thread appends to its own buffer. Device spans (work on a stream) are recorded by the
// thread that runs them (virt) or from event timings (cuda) on a track named after the stream.
// Thread-safety: all functions may be called from any thread; write_chrome_trace() and
// summarize() see the spans of threads that finished recording (call them after the run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::profile {

/// Stages of the data path and the step (see docs/ARCHITECTURE). `wait_data` is time the
/// training thread waits for the loader; `wait_device` time the host waits for a stream.
enum class Stage : uint8_t {
  load,         // reading a sample from storage or memory
  augment,      // per-sample transform (crop, flip, normalize)
  collate,      // assembling a batch
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
  count_
};

const char* stage_name(Stage s);

/// Monotonic clock in nanoseconds (steady_clock).
int64_t now_ns();

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
  /// A track for a device stream ("virt:0 compute"); returns its id for record_on().
  int stream_track(const std::string& name);

  /// Records a finished span [begin_ns, end_ns) on the calling thread's track.
  void record(Stage stage, const char* name, int64_t begin_ns, int64_t end_ns);
  /// Records a finished span on a stream track (from the thread that ran it or event times).
  void record_on(int track, Stage stage, const char* name, int64_t begin_ns, int64_t end_ns);

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
  /// Copies of all spans and tracks recorded so far.
  std::vector<Span> spans() const;
  std::vector<Track> tracks() const;

  /// Writes Chrome-trace JSON ({"traceEvents": [...]}, "X" complete events in microseconds,
  /// one tid per track with thread_name metadata) atomically (temporary file, then rename).
  /// Throws Error(io) naming the path when it cannot be written.
  void write_chrome_trace(const std::string& path) const;

  struct Impl;  // defined in profiler.cpp

 private:
  Profiler();
  Impl* impl_;
};

/// Records a span on the calling thread from construction to destruction (when enabled).
class ScopedSpan {
 public:
  ScopedSpan(Stage stage, const char* name)
      : stage_(stage), name_(name), begin_(Profiler::global().enabled() ? now_ns() : -1) {}
  ~ScopedSpan() {
    if (begin_ >= 0) Profiler::global().record(stage_, name_, begin_, now_ns());
  }
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  Stage stage_;
  const char* name_;
  int64_t begin_;
};

/// Where the time of a run went, computed from recorded spans.
struct Summary {
  double wall_seconds = 0;                    // first span begin to last span end
  double stage_seconds[static_cast<int>(Stage::count_)] = {};  // summed over all tracks
  int64_t steps = 0;                          // number of "step" spans on the training thread
  double step_seconds = 0;                    // mean step time
  double data_wait_share = 0;                 // wait_data time / training-thread step time
  double device_idle_share = 0;               // 1 - busy time of the compute track / wall (0 on cpu)
  std::string limiting_stage;                 // e.g. "input", "compute", "optimizer"
  std::string advice;                         // one line, names the stage and the knob to turn
  std::string text() const;                   // multi-line human-readable table + advice
};

/// Summarises the global profiler's spans. `num_workers` and `cores` go into the advice.
Summary summarize(int num_workers, int cores);

}  // namespace tandem::profile
