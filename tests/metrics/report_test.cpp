// The HTML report from records: every plot is present and draws something, a plot without
// data says so, the page fetches nothing, and bad input is a one-line error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <string>

#include "data/temp_dir.h"
#include "metrics/html_plots.h"
#include "tandem/error.h"
#include "tandem/metrics/jsonl_writer.h"
#include "tandem/metrics/report.h"
#include "tandem/metrics/svg_plot.h"

namespace tandem::metrics {
namespace {

using nlohmann::json;

std::vector<json> run_records() {
  std::vector<json> r = {{{"type", "run"}, {"description", "tandem train: model mlp <x>"}, {"batch_size", 32},
                          {"num_workers", 1}, {"cores", 2}}};
  for (int e = 1; e <= 2; ++e) {
    for (int w = 1; w <= 3; ++w)
      r.push_back({{"type", "window"}, {"epoch", e}, {"step", 10 * w}, {"global_step", 30 * (e - 1) + 10 * w},
                   {"time_s", e * 3.0 + w}, {"loss", 1.0 / w}, {"accuracy", 0.3 * w}, {"lr", 0.001 * w},
                   {"images_per_s", 1000.0 + w}, {"data_wait_share", 0.01 * w},
                   {"utilization", {{"cpu_busy", 0.5}, {"loader_busy", 0.1}, {"process_busy", 0.4}}}});
    r.push_back({{"type", "epoch"}, {"epoch", e}, {"train_loss", 0.5 / e}, {"train_accuracy", 0.8},
                 {"test_loss", 0.6 / e}, {"test_accuracy", 0.75 + 0.01 * e}, {"images_per_s", 1001.0},
                 {"seconds", 3.0}, {"utilization", {{"cpu_busy", 0.5}, {"loader_busy", 0.1}}}});
  }
  r.push_back({{"type", "summary"}, {"best_test_accuracy", 0.77}, {"best_epoch", 2}, {"images_per_s", 1001.0},
               {"wall_seconds", 7.0},
               {"profile", {{"advice", "compute-bound: more --threads help"},
                            {"stage_seconds", {{"forward", 1.5}, {"backward", 2.0}, {"step", 4.0}}}}}});
  return r;
}

TEST(Report, EveryPlotIsPresentAndDrawn) {
  ReportInput in;
  in.records = run_records();
  in.source = "run.jsonl";
  const std::string html = build_report_html(in);
  for (const std::string& name : report_plot_names()) {
    const std::string svg = plot_svg(html, name);
    ASSERT_FALSE(svg.empty()) << name;
    EXPECT_TRUE(plot_drawn(svg)) << name << ": nothing drawn";
    EXPECT_EQ(svg.find("no data"), std::string::npos) << name;
  }
  // Two epochs, two lines (train, test) on the loss plot; three lr points per epoch.
  const std::string loss = plot_svg(html, "loss");
  const std::regex path("class=\"series\" d=\"(M[^\"]*)\"");
  int lines = 0;
  for (auto it = std::sregex_iterator(loss.begin(), loss.end(), path); it != std::sregex_iterator(); ++it, ++lines)
    EXPECT_EQ(std::count((*it)[1].first, (*it)[1].second, 'L'), 1) << (*it)[1];  // 2 points, one segment
  EXPECT_EQ(lines, 2);
  EXPECT_NE(html.find("compute-bound: more --threads help"), std::string::npos);
  EXPECT_NE(html.find("model mlp &lt;x&gt;"), std::string::npos);  // escaped
  EXPECT_NE(html.find("name=\"viewport\""), std::string::npos);
  EXPECT_FALSE(std::regex_search(html, std::regex("(src|href)=\"(https?:)?//")));  // nothing fetched
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

TEST(Report, UtilisationFallsBackToTheEpochMeansOfAShortRun) {
  ReportInput in;
  in.records = {{{"type", "window"}, {"global_step", 10}, {"time_s", 0.1}, {"lr", 0.1}},
                {{"type", "epoch"}, {"epoch", 1}, {"time_s", 0.2}, {"utilization", {{"cpu_busy", 0.5}}}},
                {{"type", "epoch"}, {"epoch", 2}, {"time_s", 0.4}, {"utilization", {{"cpu_busy", 0.7}}}}};
  in.source = "short.jsonl";
  EXPECT_TRUE(plot_drawn(plot_svg(build_report_html(in), "utilization")));
}

TEST(Report, APlotWithoutDataSaysSo) {
  ReportInput in;
  in.records = {{{"type", "window"}, {"global_step", 10}, {"time_s", 1.0}, {"lr", 0.1}}};
  in.source = "w.jsonl";
  const std::string html = build_report_html(in);
  EXPECT_NE(plot_svg(html, "loss").find("no data"), std::string::npos);
  EXPECT_EQ(plot_svg(html, "lr").find("no data"), std::string::npos);
  EXPECT_NE(plot_svg(html, "stages").find("no data"), std::string::npos);
}

TEST(Report, RecordsOfNoRunAreAFormatError) {
  ReportInput in;
  in.records = {{{"type", "run"}}};
  in.source = "empty.jsonl";
  try {
    build_report_html(in);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::format);
    EXPECT_NE(std::string(e.what()).find("empty.jsonl"), std::string::npos);
  }
}

TEST(JsonLines, WrittenRecordsReadBackAndBadLinesAreNamed) {
  testing::TempDir dir;
  {
    JsonLinesWriter w(dir.file("m.jsonl"));
    w.write({{"a", 1}, {"nan", std::nan("")}});
    w.write({{"b", "x"}});
  }
  const auto r = read_json_lines(dir.file("m.jsonl"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["a"], 1);
  EXPECT_TRUE(r[0]["nan"].is_null());  // JSON has no NaN
  EXPECT_EQ(r[1]["b"], "x");
  testing::write_file(dir.file("bad.jsonl"), {'{', '}', '\n', '[', '1', ']', '\n'});
  try {
    read_json_lines(dir.file("bad.jsonl"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::format);
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2"), std::string::npos) << e.what();
  }
}

TEST(SvgPlot, TicksAreRoundNumbersCoveringTheRange) {
  const auto unit = nice_ticks(0, 1, 5);
  ASSERT_EQ(unit.size(), 6u);
  for (size_t i = 0; i < unit.size(); ++i) EXPECT_NEAR(unit[i], 0.2 * static_cast<double>(i), 1e-12);
  const auto t = nice_ticks(3, 97, 5);
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t.front(), 20);
  EXPECT_EQ(t.back(), 80);
  EXPECT_EQ(html_escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
}

}  // namespace
}  // namespace tandem::metrics

// Values whose span is past the largest double (1e308 and -1e308) have no tick step: the axis
// takes the two ends, and the chart is drawn without a crash.
TEST(Report, ASpanPastTheLargestDoubleKeepsTheEnds) {
  EXPECT_EQ(tandem::metrics::nice_ticks(-1e308, 1e308, 5), (std::vector<double>{-1e308, 1e308}));
  EXPECT_EQ(tandem::metrics::nice_ticks(0, 1, 5).front(), 0.0);
  tandem::metrics::Series a{"train", {1, 2}, {1e308, -1e308}};
  const std::string svg = tandem::metrics::line_chart({a}, tandem::metrics::PlotOptions{"loss", "loss", "epoch", "loss"});
  EXPECT_NE(svg.find("<svg"), std::string::npos);
}
