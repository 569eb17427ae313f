// Profiler::write_chrome_trace: the recorded spans as Chrome-trace JSON.
// Format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
// ("X" complete events with ts/dur in microseconds, "M" metadata naming processes and threads).
#include <algorithm>
#include <climits>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "tandem/atomic_file.h"
#include "tandem/error.h"
#include "tandem/profile/profiler.h"

namespace tandem::profile {

void Profiler::write_chrome_trace(const std::string& path) const {
  using nlohmann::json;
  const std::vector<Span> all = spans();
  const std::vector<Track> trs = tracks();
  int64_t t0 = INT64_MAX;
  for (const Span& s : all) t0 = std::min(t0, s.begin_ns);
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "tandem host"}}}});
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 2}, {"args", {{"name", "tandem devices"}}}});
  for (const Track& t : trs) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", t.is_stream ? 2 : 1}, {"tid", t.id},
                      {"args", {{"name", t.name}}}});
    // Host threads first, then streams, each in creation order.
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", t.is_stream ? 2 : 1}, {"tid", t.id},
                      {"args", {{"sort_index", t.id}}}});
  }
  for (const Span& s : all) {
    const bool stream = trs[static_cast<size_t>(s.track)].is_stream;
    events.push_back({{"name", s.name},
                      {"cat", stage_name(s.stage)},
                      {"ph", "X"},
                      {"pid", stream ? 2 : 1},
                      {"tid", s.track},
                      {"ts", static_cast<double>(s.begin_ns - t0) / 1e3},
                      {"dur", static_cast<double>(s.end_ns - s.begin_ns) / 1e3}});
  }
  const json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  const std::string text = doc.dump();  // before the file exists: a short window for signals
  AtomicFile out(path, "trace");
  out.write(text.data(), text.size());
  out.commit();
}

}  // namespace tandem::profile
