#!/usr/bin/env bash
# The Python module's tests: run.sh BUILD_DIR PYTHON (PYTHON empty: the module was not built).
# Exit 77 (skipped) naming what is missing; the torch tests under TANDEM_TORCH_PYTHON
# (default /opt/peers/bin/python) when it imports torch and numpy, else reported skipped.
set -euo pipefail
build=$(cd "$1" && pwd)
python=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$python" ]; then
  echo "python_module: skipped: the module is not built (it needs python3-dev and pybind11-dev: scripts/install-deps.sh, then configure again)"
  exit 77
fi
if ! "$python" -c "import numpy" 2>/dev/null; then
  echo "python_module: skipped: $python has no numpy (apt-get install python3-numpy)"
  exit 77
fi
export PYTHONPATH="$build/python:$here"
cd "$here"
"$python" -m unittest -v test_loader test_tokens test_python_dataset test_train test_hostile
torch_python=${TANDEM_TORCH_PYTHON:-/opt/peers/bin/python}
if [ -x "$torch_python" ] && "$torch_python" -c "import torch, numpy" 2>/dev/null; then
  "$torch_python" -m unittest -v test_torch test_prefetch
else
  echo "python_module: torch tests skipped: no torch (and numpy) under $torch_python (TANDEM_TORCH_PYTHON)"
fi
