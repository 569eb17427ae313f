// Reads a Chrome-trace JSON file written by `tandem train --trace` (Profiler::write_chrome_trace:
// "X" events with ts/dur in microseconds, cat = the stage's name, tid = the track, "M"
// thread_name events naming tracks, pid 2 for device streams) back into spans and tracks, so
// that `tandem report` shows the summary (profile/summary.h) and the time per stage of each
// track. Events of other kinds, or stages tandem does not know, count as "other".
// Errors: Error(io, "[report] <path>: ...") when it cannot be read, Error(format, ...) when it
// is not such a trace (not JSON, no traceEvents array).
// Thread-safety: a plain value.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "tandem/profile/profiler.h"
#include "tandem/profile/summary.h"

namespace tandem::metrics {

struct TraceFile {
  std::vector<profile::Profiler::Span> spans;   // begin/end in ns from the trace's start
  std::vector<profile::Profiler::Track> tracks; // indexed by id (0..n-1)
  std::set<std::string> names;                  // owns the spans' name strings
};

TraceFile read_trace_file(const std::string& path);

/// Seconds per stage ([Stage::count_]) on each track, summed over the whole trace.
std::vector<std::vector<double>> stage_seconds_per_track(const TraceFile& t);

}  // namespace tandem::metrics
