#include "tandem/metrics/trace_file.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "tandem/error.h"

namespace tandem::metrics {

using nlohmann::json;
using profile::Stage;

static Stage stage_of(const std::string& cat) {
  static const std::map<std::string, Stage> by_name = [] {
    std::map<std::string, Stage> m;
    for (int i = 0; i < static_cast<int>(Stage::count_); ++i)
      m[profile::stage_name(static_cast<Stage>(i))] = static_cast<Stage>(i);
    return m;
  }();
  const auto it = by_name.find(cat);
  return it == by_name.end() ? Stage::other : it->second;
}

TraceFile read_trace_file(const std::string& path) {
  std::ifstream in(path);
  TD_CHECK(in.good(), ErrorCode::io, "report", "{}: cannot open the trace: {}", path, std::strerror(errno));
  const json doc = json::parse(in, nullptr, false);
  TD_CHECK(!doc.is_discarded() && doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array(),
           ErrorCode::format, "report", "{}: expected a Chrome-trace JSON object with a traceEvents array (a --trace file)",
           path);
  TraceFile t;
  auto track = [&t](int id) -> profile::Profiler::Track& {
    while (static_cast<int>(t.tracks.size()) <= id) {
      const int n = static_cast<int>(t.tracks.size());
      t.tracks.push_back({n, "track " + std::to_string(n), false});
    }
    return t.tracks[static_cast<size_t>(id)];
  };
  for (const json& e : doc["traceEvents"]) {
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) continue;
    const std::string ph = e["ph"];
    const int tid = e.value("tid", -1);
    if (tid < 0 || tid > 1 << 20) continue;
    if (ph == "M" && e.value("name", "") == "thread_name") {
      profile::Profiler::Track& tr = track(tid);
      if (e.contains("args") && e["args"].is_object()) tr.name = e["args"].value("name", tr.name);
      tr.is_stream = e.value("pid", 1) == 2;
    } else if (ph == "X") {
      const double ts = e.value("ts", 0.0), dur = e.value("dur", 0.0);
      if (!std::isfinite(ts) || !std::isfinite(dur) || dur < 0) continue;
      track(tid).is_stream = e.value("pid", 1) == 2;
      const char* name = t.names.insert(e.value("name", std::string())).first->c_str();
      const auto b = static_cast<int64_t>(std::llround(ts * 1e3));
      t.spans.push_back({tid, stage_of(e.value("cat", "")), name, b, b + static_cast<int64_t>(std::llround(dur * 1e3))});
    }
  }
  return t;
}

std::vector<std::vector<double>> stage_seconds_per_track(const TraceFile& t) {
  std::vector<std::vector<double>> out(t.tracks.size(), std::vector<double>(static_cast<size_t>(Stage::count_), 0.0));
  for (const auto& s : t.spans)
    out[static_cast<size_t>(s.track)][static_cast<size_t>(s.stage)] += static_cast<double>(s.end_ns - s.begin_ns) * 1e-9;
  return out;
}

}  // namespace tandem::metrics
