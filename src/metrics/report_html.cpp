#include "tandem/metrics/report.h"

#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/metrics/svg_plot.h"

namespace tandem::metrics {

using nlohmann::json;
using profile::Stage;

namespace {

constexpr const char* kStyle = R"(
:root{color-scheme:light;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
body{margin:0 auto;padding:12px;max-width:1800px;color:#1b1b1b;background:#fafafa}
h1{font-size:1.3rem;margin:.2rem 0 .6rem}
p,li,td,th{font-size:.95rem;line-height:1.4}
.desc{white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.8rem;background:#fff;padding:8px;
 border:1px solid #ddd;overflow-x:auto}
.advice{background:#fff7e0;border-left:4px solid #e69f00;padding:8px 10px}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,560px),1fr));gap:12px}
figure{margin:0;background:#fff;border:1px solid #ddd;padding:4px}
figcaption{font-size:.8rem;color:#555;padding:0 6px 4px}
svg.plot{width:100%;height:auto;display:block}
svg .title{font-size:15px;font-weight:600}
svg .tick,svg .legend{font-size:11px;fill:#333}
svg .axis{font-size:12px;fill:#333}
svg .nodata{font-size:16px;fill:#999}
svg .grid{stroke:#e4e4e4;stroke-width:1}
svg .frame{fill:none;stroke:#888;stroke-width:1}
svg .series{fill:none;stroke-width:2;stroke-linejoin:round}
table{border-collapse:collapse;margin:.4rem 0;display:block;overflow-x:auto}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f0f0f0}
)";

double num(const json& j, const char* key, double fallback = NAN) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

double num_in(const json& j, const char* obj, const char* key) {
  const auto it = j.find(obj);
  return it != j.end() && it->is_object() ? num(*it, key) : NAN;
}

struct Records {
  const json* run = nullptr;
  const json* summary = nullptr;
  std::vector<const json*> windows, epochs;
};

Records split(const std::vector<json>& records) {
  Records r;
  for (const json& j : records) {
    const std::string type = j.value("type", "");
    if (type == "run") r.run = &j;
    else if (type == "summary") r.summary = &j;
    else if (type == "window") r.windows.push_back(&j);
    else if (type == "epoch") r.epochs.push_back(&j);
  }
  return r;
}

Series series_of(const std::string& name, const std::vector<const json*>& recs, const char* x_key,
                 const std::function<double(const json&)>& y) {
  Series s{name, {}, {}};
  for (const json* j : recs) {
    s.x.push_back(num(*j, x_key));
    s.y.push_back(y(*j));
  }
  return s;
}

std::function<double(const json&)> field(const char* key) {
  return [key](const json& j) { return num(j, key); };
}
std::function<double(const json&)> util_field(const char* key) {
  return [key](const json& j) { return num_in(j, "utilization", key); };
}

std::string figure(const std::string& svg, const std::string& caption) {
  return "<figure>\n" + svg + "<figcaption>" + html_escape(caption) + "</figcaption></figure>\n";
}

// The stage plot: one bar per track of the trace (steps left out: they hold the other stages),
// or one bar of the whole run's stage totals from the summary record.
std::string stage_plot(const ReportInput& in, const Records& r, std::string& caption) {
  std::vector<std::string> parts;
  std::vector<int> stages;
  std::vector<BarRow> rows;
  if (in.trace) {
    const auto per_track = stage_seconds_per_track(*in.trace);
    std::vector<double> used(static_cast<size_t>(Stage::count_), 0);
    for (const auto& row : per_track)
      for (size_t i = 0; i < row.size(); ++i) used[i] += row[i];
    for (int i = 0; i < static_cast<int>(Stage::count_); ++i)
      if (used[static_cast<size_t>(i)] > 0 && static_cast<Stage>(i) != Stage::step) {
        stages.push_back(i);
        parts.push_back(profile::stage_name(static_cast<Stage>(i)));
      }
    for (size_t t = 0; t < per_track.size(); ++t) {
      BarRow row{in.trace->tracks[t].name, {}};
      for (int i : stages) row.parts.push_back(per_track[t][static_cast<size_t>(i)]);
      rows.push_back(std::move(row));
    }
    caption = fmt::format("Seconds per stage on each thread and device stream of {} (whole run; the step spans, "
                          "which hold the others, are left out).", in.trace_source);
  } else if (r.summary && r.summary->contains("profile")) {
    BarRow row{"all tracks", {}};
    const json totals = (*r.summary)["profile"].value("stage_seconds", json::object());
    for (const auto& [name, v] : totals.items()) {
      if (name == "step" || !v.is_number()) continue;
      parts.push_back(name);
      row.parts.push_back(v.get<double>());
    }
    rows.push_back(std::move(row));
    caption = "Seconds per stage over all tracks (from the run's summary record; give --trace for one bar per track).";
  } else {
    caption = "No stage times: train with --trace and pass the trace to `tandem report --trace`.";
  }
  return stacked_bars(rows, parts, {"stages", "Where the time went", "seconds", "", false, false});
}

// The advice: the trace's summary (with the run's settings), else the summary record's.
std::string advice_of(const ReportInput& in, const Records& r) {
  if (in.trace) {
    profile::SummaryOptions o;
    const json empty = json::object();
    const json& run = r.run ? *r.run : empty;
    const json& sum = r.summary ? *r.summary : empty;
    o.num_workers = static_cast<int>(num(sum, "num_workers", num(run, "num_workers", 1)));
    o.cores = static_cast<int>(num(run, "cores", 1));
    o.batch_size = static_cast<int64_t>(num(run, "batch_size", 0));
    o.prefetch_factor = static_cast<int>(num(sum, "prefetch_factor", 0));
    o.prefetch_depth = static_cast<int>(num(sum, "prefetch_depth", 0));
    o.autotuned = num(run, "num_workers", 1) < 0;
    return profile::summarize(in.trace->spans, in.trace->tracks, o).advice;
  }
  if (r.summary && r.summary->contains("profile")) return (*r.summary)["profile"].value("advice", "");
  return "";
}

std::string epoch_table(const Records& r) {
  std::string s = "<table><tr><th>epoch</th><th>train loss</th><th>train acc</th><th>test loss</th><th>test acc</th>"
                  "<th>img/s</th><th>seconds</th><th>cpu busy</th><th>loader</th></tr>\n";
  for (const json* e : r.epochs)
    s += fmt::format("<tr><td>{}</td><td>{:.4f}</td><td>{:.2f}%</td><td>{:.4f}</td><td>{:.2f}%</td><td>{:.0f}</td>"
                     "<td>{:.1f}</td><td>{:.0f}%</td><td>{:.0f}%</td></tr>\n",
                     e->value("epoch", 0), num(*e, "train_loss"), 100 * num(*e, "train_accuracy"),
                     num(*e, "test_loss"), 100 * num(*e, "test_accuracy"), num(*e, "images_per_s"),
                     num(*e, "seconds"), 100 * num_in(*e, "utilization", "cpu_busy"),
                     100 * num_in(*e, "utilization", "loader_busy"));
  return s + "</table>\n";
}

}  // namespace

std::vector<std::string> report_plot_names() {
  return {"loss", "accuracy", "lr", "images-per-s", "data-wait", "utilization", "stages"};
}

std::string build_report_html(const ReportInput& in) {
  const Records r = split(in.records);
  TD_CHECK(!r.epochs.empty() || !r.windows.empty(), ErrorCode::format, "report",
           "{}: expected the records of a run (a --metrics-file with \"epoch\" or \"window\" records), found none",
           in.source);
  std::string plots;
  plots += figure(line_chart({series_of("train", r.epochs, "epoch", field("train_loss")),
                              series_of("test", r.epochs, "epoch", field("test_loss"))},
                             {"loss", "Loss per epoch", "epoch", "cross-entropy", false, false}),
                  "Mean training loss (augmented batches) and test loss after each epoch.");
  plots += figure(line_chart({series_of("train", r.epochs, "epoch", field("train_accuracy")),
                              series_of("test", r.epochs, "epoch", field("test_accuracy"))},
                             {"accuracy", "Accuracy per epoch", "epoch", "accuracy", false, true}),
                  "Training and test accuracy after each epoch.");
  plots += figure(line_chart({series_of("lr", r.windows, "global_step", field("lr"))},
                             {"lr", "Learning rate", "step", "lr", true, false}),
                  "Learning rate of the last step of each read-back window.");
  plots += figure(line_chart({series_of("train", r.windows, "time_s", field("images_per_s"))},
                             {"images-per-s", "Throughput", "seconds since the start", "images/s", true, false}),
                  "Training images per second between read-backs (evaluation between epochs shows as gaps).");
  plots += figure(line_chart({series_of("data wait", r.windows, "time_s", field("data_wait_share"))},
                             {"data-wait", "Data-wait share", "seconds since the start", "share of time", true, true}),
                  "Share of wall time the training thread waited for a batch.");
  // The windows' samples; a run shorter than the sampling interval has only the epochs' means.
  std::vector<const json*> sampled;
  for (const json* w : r.windows)
    if (w->contains("utilization")) sampled.push_back(w);
  if (sampled.empty()) sampled = r.epochs;
  std::vector<Series> util = {series_of("cpu busy", sampled, "time_s", util_field("cpu_busy")),
                              series_of("loader workers", sampled, "time_s", util_field("loader_busy")),
                              series_of("this process", sampled, "time_s", util_field("process_busy"))};
  bool gpu = false;
  for (const json* w : sampled) gpu = gpu || std::isfinite(num_in(*w, "utilization", "gpu_busy"));
  if (gpu) util.push_back(series_of("gpu (NVML)", sampled, "time_s", util_field("gpu_busy")));
  plots += figure(line_chart(util, {"utilization", "Utilisation", "seconds since the start", "busy share", true, true}),
                  "CPU busy share of all cores (/proc/stat), the loader workers' and this process's share of the "
                  "machine (/proc/self), sampled on a thread.");
  std::string stage_caption;
  const std::string stages = stage_plot(in, r, stage_caption);
  plots += figure(stages, stage_caption);

  const std::string advice = advice_of(in, r);
  const json empty = json::object();
  const json& sum = r.summary ? *r.summary : empty;
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                     "<title>tandem report: " + html_escape(in.source) + "</title>\n<style>" + kStyle +
                     "</style></head>\n<body>\n<h1>tandem run report</h1>\n";
  page += "<p>Metrics: " + html_escape(in.source) + (in.trace ? ", trace: " + html_escape(in.trace_source) : "") + "</p>\n";
  if (r.run) page += "<div class=\"desc\">" + html_escape(r.run->value("description", "")) + "</div>\n";
  if (r.summary)
    page += fmt::format("<p>Best test accuracy {:.2f}% (epoch {}), {:.0f} training images/s, wall {:.1f} s.</p>\n",
                        100 * num(sum, "best_test_accuracy"), sum.value("best_epoch", 0), num(sum, "images_per_s"),
                        num(sum, "wall_seconds"));
  page += "<p class=\"advice\"><b>advice:</b> " +
          html_escape(advice.empty() ? "none (train with --trace for the profiler's advice)" : advice) + "</p>\n";
  page += epoch_table(r);
  page += "<div class=\"plots\">\n" + plots + "</div>\n</body></html>\n";
  return page;
}

}  // namespace tandem::metrics
