// summarize(): where the time of a run went (definitions in tandem/profile/summary.h).
#include "tandem/profile/summary.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <utility>

#include <fmt/format.h>


namespace tandem::profile {
namespace {

// A union of time ranges (the training steps', or one track's waits for data), to count the
// part of a span that lies inside it.
class Ranges {
 public:
  void add(int64_t b, int64_t e) { ranges_.emplace_back(b, e); }
  void finish() {
    std::sort(ranges_.begin(), ranges_.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (const auto& r : ranges_) {
      if (!merged.empty() && r.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, r.second);
      } else {
        merged.push_back(r);
      }
    }
    ranges_ = std::move(merged);
  }
  // Seconds of this union that lie inside `other` (both finished).
  double inside(const Ranges& other) const {
    double sec = 0;
    for (const auto& r : ranges_) sec += other.overlap(r.first, r.second);
    return sec;
  }
  // Seconds of [b, e) inside the union.
  double overlap(int64_t b, int64_t e) const {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), b,
                               [](int64_t v, const std::pair<int64_t, int64_t>& r) { return v < r.second; });
    int64_t ns = 0;
    for (; it != ranges_.end() && it->first < e; ++it) ns += std::min(e, it->second) - std::max(b, it->first);
    return static_cast<double>(ns) / 1e9;
  }

 private:
  std::vector<std::pair<int64_t, int64_t>> ranges_;
};

bool is_input(Stage s) { return s == Stage::load || s == Stage::augment || s == Stage::collate; }
bool is_compute(Stage s) { return s == Stage::forward || s == Stage::backward || s == Stage::optimizer; }

double pct(double part, double whole) { return whole > 0 ? 100 * part / whole : 0; }

std::string advise(Summary& s, const SummaryOptions& o) {
  const double step = s.step_seconds;
  const int workers = std::max(1, o.num_workers);
  // Workers that would keep up: the loader's busy time per step over the step time.
  const int needed = step > 0 ? static_cast<int>(std::ceil(s.input_seconds * workers / step)) : workers;
  const double res = std::max({s.input_seconds, s.transfer_seconds, s.compute_seconds});
  if (s.data_wait_share >= 0.10 || (res > 0 && s.input_seconds == res && s.input_seconds >= 0.8 * step)) {
    s.limiting_stage = "input";
    // Reading the samples costs more than decoding and augmenting them: packed shards help (unless
    // the data is packed already); otherwise the work per sample itself has to shrink.
    const bool reading = s.load_seconds >= s.augment_seconds;
    const std::string lighter = reading && !o.packed ? "a packed dataset (tandem pack)"
                                : reading            ? "faster storage"
                                                     : "lighter augmentation or a smaller --image-size";
    std::string knob;
    if (o.num_workers < o.cores && !o.autotuned) {
      knob = fmt::format("raise --num-workers (now {}, CPU has {} cores) or use --num-workers auto, or use {}",
                         o.num_workers, o.cores, lighter);
    } else if (o.num_workers < o.cores) {
      knob = fmt::format("the autotuner settled on --num-workers {} of {} cores (more did not help); use {}",
                         o.num_workers, o.cores, lighter);
    } else {
      knob = fmt::format("--num-workers {} already uses the CPU's {} cores; use {} or more cores", o.num_workers,
                         o.cores, lighter);
    }
    if (s.workers_needed > 0 && s.workers_needed <= o.num_workers) {
      // Enough throughput: the batches come late, not slowly.
      knob = fmt::format("the loader's throughput suffices, so the waits are hand-off latency or CPU contention "
                         "({} cores): raise --prefetch-factor (now {}) or leave a core to the loader",
                         o.cores, o.prefetch_factor);
    }
    std::string need;
    if (s.workers_needed > 0) {
      need = fmt::format("; about {} loader worker{} would keep up with the {:.2f} ms the rest of the step takes "
                         "({} {:.2f} ms){}",
                         s.workers_needed, s.workers_needed == 1 ? "" : "s", 1e3 * s.fed_step_seconds,
                         s.has_device ? "device compute" : "compute", 1e3 * s.compute_seconds,
                         s.workers_needed > o.cores ? fmt::format(", more than this CPU's {} cores", o.cores) : "");
    }
    return fmt::format("input-bound: the input pipeline is the limit, {:.0f}% of each step waits for data (a batch "
                       "takes {:.2f} ms to load and {:.2f} ms to augment on one worker, a step {:.2f} ms){}; {}",
                       100 * s.data_wait_share, 1e3 * s.load_seconds, 1e3 * s.augment_seconds, 1e3 * step, need,
                       knob);
  }
  if (o.params_streamed && s.host_optimizer_seconds > 0.25 * step) {
    s.limiting_stage = "optimizer";
    return fmt::format("optimizer-bound: the host optimizer (the parameters live on the host, --param-device cpu) "
                       "is busy {:.0f}% of each step and {}; raise --threads for it, or a larger --batch-size "
                       "spreads it over more tokens",
                       pct(s.host_optimizer_seconds, step),
                       o.update_delayed ? "the step lasts as long as its update, which overlaps the next step "
                                          "(--offload-delay 1)"
                                        : "the device waits for its last updates before the next forward "
                                          "(--offload-delay 1 would overlap them with the next step)");
  }
  if (res > 0 && res < 0.6 * step) {
    s.limiting_stage = "host";
    return fmt::format("host-bound: no resource is busy more than {:.0f}% of the step (input {:.0f}%, copies "
                       "{:.0f}%, compute {:.0f}%); the training thread's own work (enqueueing ops, waiting for "
                       "per-step read-backs) limits it; read values back less often or use a larger --batch-size",
                       pct(res, step), pct(s.input_seconds, step), pct(s.transfer_seconds, step),
                       pct(s.compute_seconds, step));
  }
  if (o.params_streamed && s.has_device && s.transfer_seconds == res) {
    s.limiting_stage = "transfer";
    return fmt::format("transfer-bound: streaming the parameters (--param-device cpu) keeps the link busy {:.1f} ms "
                       "up and {:.1f} ms down of each {:.1f} ms step ({:.0f}% of the copies hidden behind compute); "
                       "each step moves every weight up about twice and every gradient down once, whatever the "
                       "batch: a larger --batch-size (more tokens per byte moved), --precision bf16 (half the "
                       "bytes up) or a faster link would help",
                       1e3 * s.h2d_seconds, 1e3 * s.d2h_seconds, 1e3 * step, 100 * s.hidden_share);
  }
  if (s.has_device && s.transfer_seconds == res) {
    s.limiting_stage = "transfer";
    // The copies already run on their own stream beside compute, batches ahead: when they
    // are still the busiest resource the link's bandwidth limits the run, not the depth.
    return fmt::format("transfer-bound: host-to-device copies keep the copy stream busy {:.1f} ms of each {:.1f} ms "
                       "step and already overlap compute ({} batches copied ahead); the link's bandwidth limits "
                       "the run: fewer bytes per batch (e.g. uint8 images normalized on the device) or a faster "
                       "link would help",
                       1e3 * s.h2d_seconds, 1e3 * step, std::max(1, o.prefetch_depth));
  }
  if (s.optimizer_seconds > 0.5 * s.compute_seconds) {
    s.limiting_stage = "optimizer";
    return fmt::format("optimizer-bound: the optimizer takes {:.0f}% of step time; raise --threads for the CPU "
                       "optimizer or use --offload-delay 1 to overlap it with the next step",
                       pct(s.optimizer_seconds, step));
  }
  s.limiting_stage = "compute";
  const std::string where = s.has_device ? fmt::format("the device is busy {:.0f}% of each step", pct(s.compute_seconds, step))
                                         : fmt::format("forward, backward and optimizer take {:.0f}% of each step",
                                                       pct(s.compute_seconds, step));
  std::string input;
  if (needed < o.num_workers) {
    input = fmt::format("the input pipeline keeps up with {} of the {} loader workers", std::max(1, needed),
                        o.num_workers);
  } else {
    input = fmt::format("the input pipeline keeps up (--num-workers {})", o.num_workers);
  }
  return fmt::format("compute-bound: {} and data waits {:.0f}%; {}; a larger --batch-size{} helps", where,
                     100 * s.data_wait_share, input, s.has_device ? " or a faster --device" : " or more --threads");
}

}  // namespace

Summary summarize(const std::vector<Profiler::Span>& spans, const std::vector<Profiler::Track>& tracks,
                  const SummaryOptions& o) {
  Summary s;
  if (spans.empty()) {
    s.advice = "no spans recorded (run with the profiler enabled)";
    return s;
  }
  auto is_stream = [&](int track) { return tracks[static_cast<size_t>(track)].is_stream; };
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  double step_total = 0;
  Ranges in_step;
  for (const auto& sp : spans) {
    t0 = std::min(t0, sp.begin_ns);
    t1 = std::max(t1, sp.end_ns);
    const double d = static_cast<double>(sp.end_ns - sp.begin_ns) / 1e9;
    s.stage_seconds[static_cast<int>(sp.stage)] += d;
    if (is_stream(sp.track)) s.device_stage_seconds[static_cast<int>(sp.stage)] += d;
    if (sp.stage == Stage::step && !is_stream(sp.track)) {
      ++s.steps;
      step_total += d;
      in_step.add(sp.begin_ns, sp.end_ns);
    }
  }
  in_step.finish();
  s.wall_seconds = static_cast<double>(t1 - t0) / 1e9;
  if (s.steps == 0) {
    s.advice = "no training steps recorded";
    return s;
  }
  std::vector<Ranges> waits(tracks.size());  // per host track: its waits for data
  for (const auto& sp : spans)
    if (sp.stage == Stage::wait_data && !is_stream(sp.track)) waits[static_cast<size_t>(sp.track)].add(sp.begin_ns, sp.end_ns);
  for (Ranges& r : waits) r.finish();
  std::vector<double> device_busy(tracks.size(), 0.0), device_opt(tracks.size(), 0.0);
  std::vector<double> host_compute(tracks.size(), 0.0), host_opt(tracks.size(), 0.0);
  std::vector<Ranges> host_opt_ranges(tracks.size());  // nested optimizer spans counted once
  std::vector<Ranges> host_wait_ranges(tracks.size());  // waits for a device or another thread
  double load = 0, augment = 0, input = 0, h2d = 0, d2h = 0, wait = 0, device_wait = 0;
  std::vector<Ranges> device_ranges(tracks.size());  // per stream track: its compute spans in steps
  for (const auto& sp : spans) {
    if (sp.stage == Stage::step) continue;
    const double d = in_step.overlap(sp.begin_ns, sp.end_ns);
    if (d <= 0) continue;
    const auto t = static_cast<size_t>(sp.track);
    if (is_stream(sp.track)) {
      if (sp.stage == Stage::h2d) {
        h2d += d;
      } else if (sp.stage == Stage::d2h) {
        d2h += d;
      } else {
        device_busy[t] += d;
        device_ranges[t].add(sp.begin_ns, sp.end_ns);
        if (sp.stage == Stage::optimizer) device_opt[t] += d;
      }
      continue;
    }
    if (is_input(sp.stage)) {
      input += d;
      if (sp.stage == Stage::load) load += d;
      if (sp.stage == Stage::augment) augment += d;
    } else if (sp.stage == Stage::wait_data) {
      wait += d;
    } else if (sp.stage == Stage::wait_device) {
      host_wait_ranges[t].add(sp.begin_ns, sp.end_ns);
      // Back-pressure (e.g. the prefetcher waiting for a copy) inside a wait for data.
      device_wait += waits[t].overlap(sp.begin_ns, sp.end_ns);
    } else if (is_compute(sp.stage)) {
      host_compute[t] += d;
      if (sp.stage == Stage::optimizer) {
        host_opt[t] += d;
        host_opt_ranges[t].add(sp.begin_ns, sp.end_ns);
      }
    }
  }
  const auto steps = static_cast<double>(s.steps);
  const size_t busiest = static_cast<size_t>(std::max_element(device_busy.begin(), device_busy.end()) -
                                             device_busy.begin());
  s.has_device = device_busy[busiest] > 0;
  double hidden = 0;  // copy time (in steps) during which the busiest stream computed
  if (s.has_device && h2d + d2h > 0) {
    Ranges& busy = device_ranges[busiest];
    busy.finish();
    for (const auto& sp : spans) {
      if (!is_stream(sp.track) || (sp.stage != Stage::h2d && sp.stage != Stage::d2h)) continue;
      // The copy's part inside the steps that overlaps compute: clip to each compute range.
      hidden += std::min(busy.overlap(sp.begin_ns, sp.end_ns), in_step.overlap(sp.begin_ns, sp.end_ns));
    }
    s.hidden_share = std::clamp(hidden / (h2d + d2h), 0.0, 1.0);
  }
  for (size_t t = 0; t < tracks.size(); ++t) {  // the host track busiest with optimizer work
    host_opt_ranges[t].finish();
    host_wait_ranges[t].finish();
    // A wait nested in an optimizer span (for the host update thread, for a copy) is no update.
    const double sec =
        std::max(0.0, host_opt_ranges[t].inside(in_step) - host_wait_ranges[t].inside(host_opt_ranges[t])) /
        static_cast<double>(s.steps);
    if (sec > s.host_optimizer_seconds) {
      s.host_optimizer_seconds = sec;
      s.host_optimizer_track = tracks[t].name;
    }
  }
  if (s.has_device) {
    s.compute_seconds = device_busy[busiest] / steps;
    s.optimizer_seconds = device_opt[busiest] / steps;
  } else {
    const size_t h = static_cast<size_t>(std::max_element(host_compute.begin(), host_compute.end()) -
                                         host_compute.begin());
    s.compute_seconds = host_compute[h] / steps;
    s.optimizer_seconds = host_opt[h] / steps;
  }
  const double parallel = std::max(1, o.num_workers);
  s.input_seconds = input / steps / parallel;
  s.load_seconds = load / steps;
  s.augment_seconds = augment / steps;
  s.h2d_seconds = h2d / steps;
  s.d2h_seconds = d2h / steps;
  s.transfer_seconds = std::max(s.h2d_seconds, s.d2h_seconds);
  s.step_seconds = step_total / steps;
  // Waiting for a batch because the device has not freed a buffer or finished a copy is not
  // waiting for data: the prefetcher records those waits as wait_device inside wait_data.
  s.data_wait_share = std::clamp((wait - device_wait) / step_total, 0.0, 1.0);
  s.device_idle_share = s.has_device ? std::clamp(1.0 - s.compute_seconds / s.step_seconds, 0.0, 1.0) : 0.0;
  s.overlap_efficiency = std::max({s.input_seconds, s.transfer_seconds, s.compute_seconds}) / s.step_seconds;
  s.images_per_s = o.batch_size > 0 ? static_cast<double>(o.batch_size) / s.step_seconds : 0;
  s.fed_step_seconds = std::max({s.compute_seconds, s.transfer_seconds, (1.0 - s.data_wait_share) * s.step_seconds});
  if (s.fed_step_seconds > 0 && input > 0)
    s.workers_needed = static_cast<int>(std::ceil(s.input_seconds * parallel / s.fed_step_seconds));
  s.note = o.note;
  s.advice = advise(s, o);
  return s;
}

Summary summarize(const SummaryOptions& options) {
  const Profiler& p = Profiler::global();
  const std::vector<Profiler::Span> spans = p.spans();  // collects device sources first
  return summarize(spans, p.tracks(), options);
}

Summary summarize(int num_workers, int cores) {
  SummaryOptions o;
  o.num_workers = num_workers;
  o.cores = cores;
  return summarize(o);
}

std::string Summary::text() const {
  std::string out = note.empty() ? "" : note + "\n";
  out += fmt::format("profile: {} steps, {:.2f} ms/step, wall {:.2f} s\n", steps, step_seconds * 1e3,
                                wall_seconds);
  // Host threads and device streams apart: a host span of a device stage is mostly enqueueing.
  const double per_step = steps ? 1e3 / static_cast<double>(steps) : 0.0;
  out += fmt::format("  {:<12} {:>10} {:>14} {:>16}\n", "stage", "host s", "host ms/step", "device ms/step");
  out += "  (host rows sum span time per thread: a wait nested in another span, e.g. the prefetcher's\n"
         "   back-pressure inside \"wait for batch\", counts in both rows; the shares below count it once)\n";
  for (int i = 0; i < static_cast<int>(Stage::count_); ++i) {
    if (stage_seconds[i] <= 0 || static_cast<Stage>(i) == Stage::step) continue;
    const double host = stage_seconds[i] - device_stage_seconds[i];
    out += fmt::format("  {:<12} {:10.3f} {:14.3f} {:16.3f}\n", stage_name(static_cast<Stage>(i)), host,
                       host * per_step, device_stage_seconds[i] * per_step);
  }
  if (steps > 0) {
    out += fmt::format("  busy per step: input {:.2f} ms, h2d {:.2f} ms, compute {:.2f} ms ({}); overlap "
                       "efficiency {:.2f}\n",
                       1e3 * input_seconds, 1e3 * h2d_seconds, 1e3 * compute_seconds,
                       has_device ? "device stream" : "training thread", overlap_efficiency);
    if (has_device && h2d_seconds + d2h_seconds > 0)
      out += fmt::format("  copies per step: h2d {:.2f} ms, d2h {:.2f} ms, {:.0f}% of their time hidden behind compute\n",
                         1e3 * h2d_seconds, 1e3 * d2h_seconds, 100 * hidden_share);
    if (host_optimizer_seconds > 0 && has_device)
      out += fmt::format("  host optimizer {:.2f} ms per step (track \"{}\")\n", 1e3 * host_optimizer_seconds,
                         host_optimizer_track);
    out += fmt::format("  data-wait share {:.1f}% of step time, device-idle share {:.1f}%", 100 * data_wait_share,
                       100 * device_idle_share);
    if (images_per_s > 0) out += fmt::format(", {:.0f} images/s", images_per_s);
    out += "\n";
  }
  out += "advice: " + advice + "\n";
  return out;
}

}  // namespace tandem::profile
