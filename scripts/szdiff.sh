#!/usr/bin/env bash
# The line-count change of a submission, per folder (as tinygrad's szdiff): lines added,
# removed and the net change against BASE, and each folder's lines now, for tracked text files.
# Usage: scripts/szdiff.sh [BASE]. BASE defaults to $SZDIFF_BASE, else the newest first-parent
# commit made more than 3 hours (a session's length) before HEAD: the previous landed commit.
# Folders are src/<area>, tools, tests/<area>, docs, ... (two levels under src/ and tests/).
set -euo pipefail
cd "$(dirname "$0")/.."
head_time=$(git log -1 --format=%ct HEAD)
base=${1:-${SZDIFF_BASE:-$(git rev-list -1 --first-parent --before="$((head_time - 10800))" HEAD)}}
if [ -z "$base" ]; then
  echo "szdiff: no commit before this submission to compare with"
  exit 0
fi
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.now"' EXIT
echo "szdiff: lines against $(git log -1 --format='%h %s' "$base" | cut -c1-60)"
git diff --numstat "$base" HEAD | awk -F'\t' '$1 != "-"' >"$tmp" || true
git ls-files -z | xargs -0 grep -Ic '' 2>/dev/null >"$tmp.now" || true
awk -F'\t' -v now="$tmp.now" '
  function folder(path,   n, p) {
    n = split(path, p, "/")
    return (n > 2 && (p[1] == "src" || p[1] == "tests")) ? p[1] "/" p[2] : (n > 1 ? p[1] : ".")
  }
  BEGIN {
    while ((getline line < now) > 0) {
      i = index(line, ":"); path = substr(line, 1, i - 1); c = substr(line, i + 1) + 0
      f = folder(path); lines[f] += c; total += c; seen[f] = 1
    }
  }
  { f = folder($3); add[f] += $1; del[f] += $2; seen[f] = 1; ta += $1; td += $2 }
  END {
    printf "  %-24s %9s %9s %9s %9s\n", "folder", "added", "removed", "net", "lines"
    for (f in seen) if (add[f] + del[f] > 0) printf "  %-24s %9d %9d %+9d %9d\n", f, add[f], del[f], add[f] - del[f], lines[f] | "sort"
    close("sort")
    printf "  %-24s %9d %9d %+9d %9d\n", "total", ta, td, ta - td, total
  }' "$tmp"

