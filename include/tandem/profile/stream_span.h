// StreamSpan: a profiler span for the work enqueued on a stream between its construction and
// end(): a timestamp item before and a record item after, on the stream's own track, so the
// span shows when the device (or the stream's thread) ran the work, not when it was enqueued.
// Inactive when the profiler is off at construction. Thread-safety: used by the thread that
// enqueues on the stream.
#pragma once

#include <memory>
#include <string>

#include "tandem/profile/profiler.h"
#include "tandem/stream.h"

namespace tandem::profile {

// Enqueues a timestamp before and a span record after the work enqueued between them, on
// `stream`'s profiler track; inactive when the profiler is off at construction.
class StreamSpan {
 public:
  StreamSpan(const Stream& stream, const std::string& track, Stage stage, const char* name)
      : stream_(stream), stage_(stage), name_(name) {
    if (!Profiler::global().enabled()) return;
    track_ = Profiler::global().stream_track(track);
    begin_ = std::make_shared<int64_t>(0);
    stream_.enqueue([b = begin_] { *b = now_ns(); });
  }
  void end() {
    if (!begin_) return;
    stream_.enqueue([b = begin_, track = track_, stage = stage_, name = name_] {
      Profiler::global().record_on(track, stage, name, *b, now_ns());
    });
    begin_.reset();
  }

 private:
  const Stream& stream_;
  Stage stage_;
  const char* name_;
  int track_ = -1;
  std::shared_ptr<int64_t> begin_;
};

}  // namespace tandem::profile
