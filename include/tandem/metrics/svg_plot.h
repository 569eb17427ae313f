// Plots as inline SVG for the HTML report: line charts of series over a shared x axis and
// horizontal stacked bars. Every plot is one <svg class="plot" data-plot="ID"> element with a
// viewBox (it scales with the page: phone or wide screen), axes with round-number ticks, a
// legend, and one <path class="series"> per series (or <rect class="bar"> per bar part).
// Non-finite points are left out; a series without points draws nothing, and a plot without
// any point says "no data" in place of the lines.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace tandem::metrics {

struct Series {
  std::string name;
  std::vector<double> x, y;  // same length
};

struct PlotOptions {
  std::string id;          // data-plot attribute, unique in the page
  std::string title;
  std::string x_label, y_label;
  bool y_from_zero = false;  // start the y axis at 0 (shares, rates)
  bool y_percent = false;    // y values in [0, 1] shown as percent
};

/// A line chart of `series` (each its own colour, markers when it has few points).
std::string line_chart(const std::vector<Series>& series, const PlotOptions& opt);

struct BarRow {
  std::string label;                 // e.g. a track: "train", "loader worker 0"
  std::vector<double> parts;         // seconds per part, in the order of `part_names`
};

/// One horizontal bar per row, split into parts (stage times); x in `opt.x_label` units.
std::string stacked_bars(const std::vector<BarRow>& rows, const std::vector<std::string>& part_names,
                         const PlotOptions& opt);

/// `text` with &, <, >, " escaped for HTML and SVG.
std::string html_escape(const std::string& text);

/// Round tick values covering [lo, hi], about `count` of them (1, 2 or 5 times a power of ten).
std::vector<double> nice_ticks(double lo, double hi, int count);

}  // namespace tandem::metrics
