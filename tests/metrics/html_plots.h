// The <svg> element of a report's plot, by its data-plot name, for the report tests.
#pragma once

#include <string>

namespace tandem::metrics {

/// The text of the <svg ... data-plot="name"> element up to its </svg> ("" when absent).
inline std::string plot_svg(const std::string& html, const std::string& name) {
  const size_t b = html.find("data-plot=\"" + name + "\"");
  if (b == std::string::npos) return "";
  const size_t e = html.find("</svg>", b);
  return e == std::string::npos ? "" : html.substr(b, e - b);
}

/// Whether the plot draws something: a line (a path with a segment) or a bar.
inline bool plot_drawn(const std::string& svg) {
  return svg.find("class=\"series\" d=\"M") != std::string::npos || svg.find("class=\"bar\"") != std::string::npos;
}

}  // namespace tandem::metrics
