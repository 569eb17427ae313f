// The HTML report of a run (`tandem report RUN.jsonl [--trace T.json] --out report.html`): one
// self-contained page (inline CSS and SVG, no scripts, no fetches) with the run's description,
// its final figures and the plots
//   loss, accuracy     train and test per epoch ("epoch" records)
//   lr                 learning rate per read-back window over the global step
//   images-per-s       training images/s per window over the run's time
//   data-wait          the share of time the training thread waited for batches, per window
//   utilization        CPU busy share, the loader workers' share (and the GPU's with NVML)
//   stages             seconds per stage on each track of the trace (with a trace), else the
//                      stage totals of the run's "summary" record (a run with --trace)
// and the profiler's advice line. Each plot is an <svg class="plot" data-plot="NAME">.
// Records are those of a --metrics-file (docs/metrics.md); unknown types and
// fields are ignored, missing ones leave a plot saying "no data".
// Thread-safety: pure function.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/metrics/trace_file.h"

namespace tandem::metrics {

struct ReportInput {
  std::vector<nlohmann::json> records;  // read_json_lines of a --metrics-file
  std::string source;                   // its path, shown in the page
  const TraceFile* trace = nullptr;     // the run's --trace, when given
  std::string trace_source;
};

/// The plots' names, in page order.
std::vector<std::string> report_plot_names();

/// The page. Throws Error(format, "[report] <source>: ...") when the records hold no "epoch"
/// and no "window" record (not a metrics file of a run).
std::string build_report_html(const ReportInput& in);

}  // namespace tandem::metrics
