// `tandem report RUN.jsonl [--trace T.json] --out report.html`: the HTML report of a run
// (tandem/metrics/report.h), written atomically.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "tandem/atomic_file.h"
#include "tandem/error.h"
#include "tandem/metrics/jsonl_writer.h"
#include "tandem/metrics/report.h"

namespace tandem::tools {

namespace {
struct ReportFlags {
  std::string metrics, trace, out;
};
ReportFlags& flags() {
  static ReportFlags f;
  return f;
}
}  // namespace

void add_report_command(CLI::App& app) {
  CLI::App* c = app.add_subcommand(
      "report", "Write an HTML report (plots as inline SVG, no network) of a run's --metrics-file and --trace");
  ReportFlags& f = flags();
  c->add_option("metrics", f.metrics, "JSON-lines file written by `tandem train --metrics-file`")->required();
  c->add_option("--trace", f.trace, "Chrome-trace file written by `tandem train --trace` (stage breakdown, advice)");
  c->add_option("--out,-o", f.out, "HTML file to write")->required();
  strict_values(c);
}

int run_report_command() {
  const ReportFlags& f = flags();
  metrics::ReportInput in;
  in.records = metrics::read_json_lines(f.metrics);
  in.source = f.metrics;
  metrics::TraceFile trace;
  if (!f.trace.empty()) {
    trace = metrics::read_trace_file(f.trace);
    in.trace = &trace;
    in.trace_source = f.trace;
  }
  std::string html;
  try {
    html = metrics::build_report_html(in);
  } catch (const nlohmann::json::exception& e) {  // a field of another type than the one written
    throw_error(ErrorCode::format, "report",
                fmt::format("{}: a record holds a field of the wrong type ({}): expected a file written by "
                            "`tandem train --metrics-file`",
                            f.metrics, e.what()));
  }
  AtomicFile out(f.out, "report");
  out.write(html.data(), html.size());
  out.commit();
  fmt::print("wrote report to {} ({} records{})\n", f.out, in.records.size(),
             in.trace ? fmt::format(", {} trace spans", trace.spans.size()) : "");
  return 0;
}

}  // namespace tandem::tools
