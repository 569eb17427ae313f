#include "tandem/profile/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
}  // namespace

struct Profiler::Impl {
  std::atomic<bool> enabled{false};
  mutable std::mutex mu;
  std::vector<std::unique_ptr<Buffer>> buffers;  // one per thread and one per stream track
  std::vector<Track> tracks;                     // index == track id
};

namespace {
thread_local int t_track = -1;
}

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

void Profiler::record_on(int track, Stage stage, const char* name, int64_t begin_ns, int64_t end_ns) {
  if (!enabled()) return;
  Buffer* b;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    TD_ASSERT(track >= 0 && track < static_cast<int>(impl_->buffers.size()));
    b = impl_->buffers[static_cast<size_t>(track)].get();
  }
  std::lock_guard<std::mutex> bl(b->mu);
  b->spans.push_back({track, stage, name, begin_ns, end_ns});
}

void Profiler::record(Stage stage, const char* name, int64_t begin_ns, int64_t end_ns) {
  if (!enabled()) return;
  record_on(this_thread_track(*impl_), stage, name, begin_ns, end_ns);
}

std::vector<Profiler::Span> Profiler::spans() const {
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
  const std::string tmp = path + ".tmp";
  {
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) throw_error(ErrorCode::io, "trace", path + ": cannot create the trace file");
    const std::string text = doc.dump();
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (std::fclose(f) != 0 || !ok) {
      std::remove(tmp.c_str());
      throw_error(ErrorCode::io, "trace", path + ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw_error(ErrorCode::io, "trace", path + ": rename failed");
  }
}

std::string Summary::text() const {
  std::string out = fmt::format("profile: {} steps, {:.2f} ms/step, wall {:.2f} s\n", steps, step_seconds * 1e3,
                                wall_seconds);
  for (int i = 0; i < static_cast<int>(Stage::count_); ++i) {
    if (stage_seconds[i] <= 0) continue;
    out += fmt::format("  {:<12} {:9.3f} s total  {:8.3f} ms/step\n", stage_name(static_cast<Stage>(i)),
                       stage_seconds[i], steps ? stage_seconds[i] * 1e3 / static_cast<double>(steps) : 0.0);
  }
  out += fmt::format("  data-wait share {:.1f}% of step time, device-idle share {:.1f}%\n", 100 * data_wait_share,
                     100 * device_idle_share);
  out += "advice: " + advice + "\n";
  return out;
}

Summary summarize(int num_workers, int cores) {
  const Profiler& p = Profiler::global();
  const std::vector<Profiler::Span> all = p.spans();
  const std::vector<Profiler::Track> trs = p.tracks();
  Summary s;
  if (all.empty()) {
    s.advice = "no spans recorded (run with the profiler enabled)";
    return s;
  }
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  double step_total = 0;
  // Per stream track: busy time, for device idle.
  std::vector<double> stream_busy(trs.size(), 0.0);
  for (const auto& sp : all) {
    t0 = std::min(t0, sp.begin_ns);
    t1 = std::max(t1, sp.end_ns);
    const double d = static_cast<double>(sp.end_ns - sp.begin_ns) / 1e9;
    s.stage_seconds[static_cast<int>(sp.stage)] += d;
    if (sp.stage == Stage::step) {
      ++s.steps;
      step_total += d;
    }
    if (trs[static_cast<size_t>(sp.track)].is_stream &&
        (sp.stage == Stage::forward || sp.stage == Stage::backward || sp.stage == Stage::optimizer))
      stream_busy[static_cast<size_t>(sp.track)] += d;
  }
  s.wall_seconds = static_cast<double>(t1 - t0) / 1e9;
  s.step_seconds = s.steps ? step_total / static_cast<double>(s.steps) : 0;
  const double wait = s.stage_seconds[static_cast<int>(Stage::wait_data)];
  s.data_wait_share = step_total > 0 ? wait / step_total : 0;
  double busiest = 0;
  bool has_stream = false;
  for (size_t i = 0; i < trs.size(); ++i)
    if (trs[i].is_stream && stream_busy[i] > 0) {
      has_stream = true;
      busiest = std::max(busiest, stream_busy[i]);
    }
  s.device_idle_share = has_stream && step_total > 0 ? std::max(0.0, 1.0 - busiest / step_total) : 0;

  const double per_step = step_total > 0 ? step_total : 1;
  const double compute = s.stage_seconds[static_cast<int>(Stage::forward)] +
                         s.stage_seconds[static_cast<int>(Stage::backward)];
  const double opt = s.stage_seconds[static_cast<int>(Stage::optimizer)];
  const double h2d = s.stage_seconds[static_cast<int>(Stage::h2d)];
  if (s.data_wait_share >= 0.10) {
    s.limiting_stage = "input";
    s.advice = fmt::format(
        "input-bound: {:.0f}% of each step waits for data; raise --num-workers (now {}, CPU has {} cores) or "
        "--prefetch-factor, or use a packed dataset",
        100 * s.data_wait_share, num_workers, cores);
  } else if (has_stream && h2d > compute && h2d > opt) {
    s.limiting_stage = "transfer";
    s.advice = fmt::format(
        "transfer-bound: host-to-device copies take {:.0f}% of step time; keep batches in pinned memory and "
        "raise --prefetch (copies ahead), or send uint8 images and normalize on the device",
        100 * h2d / per_step);
  } else if (opt > 0.5 * compute) {
    s.limiting_stage = "optimizer";
    s.advice = fmt::format(
        "optimizer-bound: the optimizer takes {:.0f}% of step time; raise --threads for the CPU optimizer or "
        "use --offload-delay 1 to overlap it with the next step",
        100 * opt / per_step);
  } else {
    s.limiting_stage = "compute";
    s.advice = fmt::format(
        "compute-bound: forward and backward take {:.0f}% of step time and data waits only {:.0f}%; the input "
        "pipeline keeps up (--num-workers {} is enough); a larger --batch-size or a faster --device helps",
        100 * compute / per_step, 100 * s.data_wait_share, num_workers);
  }
  return s;
}

}  // namespace tandem::profile
