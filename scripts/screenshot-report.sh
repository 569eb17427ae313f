#!/usr/bin/env bash
# Screenshots an HTML report (`tandem report ... --out report.html`) with headless Chromium,
# at a phone's width and at a wide screen's, and checks that every plot of the page is there
# and draws something (a line or a bar), from the page as Chromium parsed it (--dump-dom).
# Chromium is not a dependency of tandem: install it when wanted with
#   apt-get install --no-install-recommends chromium
# Usage: scripts/screenshot-report.sh REPORT.html [OUT_PREFIX]
#   writes OUT_PREFIX-wide.png (1600x2200) and OUT_PREFIX-phone.png (412x3600);
#   OUT_PREFIX defaults to the report's path without .html.
# Exit status: 0 when both screenshots were written and every plot draws; 1 when a plot is
# missing or empty; 2 for bad usage or when Chromium is not installed.
set -uo pipefail
report=${1:?usage: screenshot-report.sh REPORT.html [OUT_PREFIX]}
prefix=${2:-${report%.html}}
[ -f "$report" ] || { echo "screenshot-report: $report not found" >&2; exit 2; }
chrome=""
for c in chromium chromium-browser google-chrome; do
  if command -v "$c" >/dev/null 2>&1; then chrome=$c; break; fi
done
if [ -z "$chrome" ]; then
  echo "screenshot-report: Chromium not found; install it with: apt-get install --no-install-recommends chromium" >&2
  exit 2
fi
url="file://$(cd "$(dirname "$report")" && pwd)/$(basename "$report")"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" --no-first-run)
shot() {  # WIDTH HEIGHT FILE
  "$chrome" "${flags[@]}" --window-size="$1,$2" --screenshot="$3" "$url" >/dev/null 2>&1
  [ -s "$3" ] || { echo "screenshot-report: $chrome wrote no $3" >&2; exit 2; }
  echo "screenshot-report: wrote $3 (${1}x$2)"
}
shot 1600 2200 "$prefix-wide.png"
shot 412 3600 "$prefix-phone.png"
# The DOM as Chromium parsed it: one <svg class="plot" data-plot=NAME> per plot, each with a
# drawn path or bar.
dom=$("$chrome" "${flags[@]}" --dump-dom "$url" 2>/dev/null)
status=0
for name in loss accuracy lr images-per-s data-wait utilization stages; do
  svg=$(printf '%s' "$dom" | tr '\n' ' ' | grep -o "data-plot=\"$name\"[^§]*" | sed 's#</svg>.*##')
  if [ -z "$svg" ]; then
    echo "screenshot-report: plot $name missing" >&2; status=1
  elif ! printf '%s' "$svg" | grep -qE 'class="series" d="M|class="bar"'; then
    echo "screenshot-report: plot $name draws nothing" >&2; status=1
  else
    echo "screenshot-report: plot $name drawn"
  fi
done
exit $status
