#!/usr/bin/env bash
# The wheel on its own: installs WHEEL into a fresh venv (no index, no compiler needed) and runs
# the Python module's tests against the installed package, from outside the source tree's
# build (no PYTHONPATH to a build folder). The venv sees Debian's numpy (python3-numpy), which
# the tests need; the torch tests run under TANDEM_TORCH_PYTHON when it has torch (as run.sh).
# Usage: scripts/check-wheel.sh WHEEL [VENV]   (VENV default: a temporary folder, removed)
set -euo pipefail
wheel=$(realpath "${1:?usage: check-wheel.sh WHEEL [VENV]}")
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${2:-$(mktemp -d /tmp/tandem-wheel-venv.XXXXXX)}
[ -n "${2:-}" ] || trap 'rm -rf "$venv"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --quiet --no-index "$wheel"
cd "$here/python/tests"  # the tests and their data helpers; tandem comes from the venv
"$venv/bin/python" - <<'PY'
import os, tandem
print("check-wheel: tandem from", os.path.dirname(tandem.__file__))
PY
PYTHONPATH="$here/python/tests" "$venv/bin/python" -m unittest test_loader test_tokens test_python_dataset test_train test_hostile
