#include "tandem/metrics/svg_plot.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tandem::metrics {

namespace {

// A palette that stays apart for colour-blind readers (Okabe and Ito, 2008).
const char* const kColors[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000"};
constexpr int kNumColors = sizeof kColors / sizeof kColors[0];

// The drawing area inside the 640 x 300 viewBox.
constexpr double kW = 640, kH = 320, kLeft = 64, kRight = 16, kTop = 36, kBottom = 84;

std::string tick_label(double v, bool percent) {
  if (percent) return fmt::format("{:g}%", std::round(v * 1000) / 10);
  const double a = std::fabs(v);
  if (a >= 1e6) return fmt::format("{:g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:g}k", v / 1e3);
  return fmt::format("{:.4g}", v);
}

struct Range {
  double lo = INFINITY, hi = -INFINITY;
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
  void widen() {
    if (empty()) lo = 0, hi = 1;
    if (hi == lo) {
      const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
      lo -= d;
      hi += d;
    }
  }
};

std::string open_svg(const PlotOptions& opt) {
  return fmt::format(
      "<svg class=\"plot\" data-plot=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n<text class=\"title\" x=\"{}\" y=\"22\" text-anchor=\"middle\">{}</text>\n",
      html_escape(opt.id), kW, kH, html_escape(opt.title), kW / 2, html_escape(opt.title));
}

std::string legend(const std::vector<std::string>& names) {
  std::string s;
  double x = kLeft, y = kH - 22;  // two rows at most below the axis label
  for (size_t i = 0; i < names.size(); ++i) {
    const double w = 24 + 7.0 * static_cast<double>(names[i].size());
    if (x + w > kW && x > kLeft) x = kLeft, y += 14;
    s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
                     "<text class=\"legend\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                     x, y - 9, kColors[i % kNumColors], x + 14, y, html_escape(names[i]));
    x += w;
  }
  return s;
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  std::vector<double> out;
  if (!(hi > lo) || count < 1) return {lo};
  // A span past the largest double (losses of 1e308 and -1e308) has no step: the ends only.
  if (!std::isfinite(hi - lo)) return {lo, hi};
  const double raw = (hi - lo) / count, mag = std::pow(10, std::floor(std::log10(raw)));
  const double f = raw / mag, step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
  const double k0 = std::ceil(lo / step - 1e-9);
  for (double k = k0; k * step <= hi + step * 1e-9 && out.size() < 100; k += 1)
    out.push_back(k == 0 ? 0 : k * step);
  if (out.empty()) out = {lo, hi};  // callers take front() and back()
  return out;
}

std::string line_chart(const std::vector<Series>& series, const PlotOptions& opt) {
  Range xr, yr;
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) xr.add(s.x[i]), yr.add(s.y[i]);
  const bool empty = yr.empty();
  if (opt.y_from_zero) yr.add(0);
  xr.widen();
  yr.widen();
  const std::vector<double> yt = nice_ticks(yr.lo, yr.hi, 5), xt = nice_ticks(xr.lo, xr.hi, 6);
  yr.lo = std::min(yr.lo, yt.front());
  yr.hi = std::max(yr.hi, yt.back());
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - xr.lo) / (xr.hi - xr.lo) * pw; };
  auto py = [&](double y) { return kTop + ph - (y - yr.lo) / (yr.hi - yr.lo) * ph; };
  std::string s = open_svg(opt);
  for (double t : yt)
    s += fmt::format("<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>"
                     "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                     kLeft, kW - kRight, py(t), py(t), kLeft - 6, py(t) + 4, tick_label(t, opt.y_percent));
  for (double t : xt)
    if (t >= xr.lo && t <= xr.hi)
      s += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", px(t),
                       kTop + ph + 16, tick_label(t, false));
  s += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", kLeft, kTop, pw, ph);
  s += fmt::format("<text class=\"axis\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", kLeft + pw / 2,
                   kTop + ph + 30, html_escape(opt.x_label));
  s += fmt::format("<text class=\"axis\" transform=\"translate(14 {:.1f}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                   kTop + ph / 2, html_escape(opt.y_label));
  if (empty)
    s += fmt::format("<text class=\"nodata\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">no data</text>\n",
                     kLeft + pw / 2, kTop + ph / 2);
  std::vector<std::string> names;
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& se = series[k];
    const char* color = kColors[k % kNumColors];
    names.push_back(se.name);
    std::string d;
    int points = 0;
    for (size_t i = 0; i < se.x.size() && i < se.y.size(); ++i) {
      if (!std::isfinite(se.x[i]) || !std::isfinite(se.y[i])) continue;
      d += fmt::format("{}{:.1f},{:.1f}", points == 0 ? "M" : " L", px(se.x[i]), py(se.y[i]));
      ++points;
    }
    if (points == 0) continue;
    s += fmt::format("<path class=\"series\" d=\"{}\" stroke=\"{}\"/>\n", d, color);
    if (points <= 30)
      for (size_t i = 0; i < se.x.size() && i < se.y.size(); ++i)
        if (std::isfinite(se.x[i]) && std::isfinite(se.y[i]))
          s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(se.x[i]), py(se.y[i]), color);
  }
  return s + legend(names) + "</svg>\n";
}

std::string stacked_bars(const std::vector<BarRow>& rows, const std::vector<std::string>& part_names,
                         const PlotOptions& opt) {
  double total_max = 0;
  for (const BarRow& r : rows) {
    double t = 0;
    for (double v : r.parts) t += std::isfinite(v) && v > 0 ? v : 0;
    total_max = std::max(total_max, t);
  }
  const double left = 150, pw = kW - left - kRight;
  const double bar_h = rows.empty() ? 0 : std::min(28.0, (kH - kTop - kBottom) / static_cast<double>(rows.size()) - 4);
  const double hi = total_max > 0 ? nice_ticks(0, total_max, 5).back() : 1;
  std::string s = open_svg(opt);
  for (double t : nice_ticks(0, hi, 5))
    s += fmt::format("<line class=\"grid\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\"/>"
                     "<text class=\"tick\" x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                     left + t / hi * pw, kTop, kH - kBottom, kH - kBottom + 16, tick_label(t, false));
  s += fmt::format("<text class=\"axis\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", left + pw / 2,
                   kH - kBottom + 30, html_escape(opt.x_label));
  if (total_max <= 0)
    s += fmt::format("<text class=\"nodata\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">no data</text>\n",
                     left + pw / 2, kTop + (kH - kTop - kBottom) / 2);
  for (size_t r = 0; r < rows.size(); ++r) {
    const double y = kTop + static_cast<double>(r) * (bar_h + 4);
    s += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 6,
                     y + bar_h / 2 + 4, html_escape(rows[r].label));
    double x = left;
    for (size_t p = 0; p < rows[r].parts.size(); ++p) {
      const double v = rows[r].parts[p];
      if (!(std::isfinite(v) && v > 0)) continue;
      const double w = v / hi * pw;
      s += fmt::format("<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
                       "<title>{}: {} {:.3f} s</title></rect>\n",
                       x, y, w, bar_h, kColors[p % kNumColors], html_escape(rows[r].label),
                       p < part_names.size() ? html_escape(part_names[p]) : "", v);
      x += w;
    }
  }
  return s + legend(part_names) + "</svg>\n";
}

}  // namespace tandem::metrics
