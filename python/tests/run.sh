#!/usr/bin/env bash
# The Python module's tests: run.sh BUILD_DIR PYTHON (PYTHON empty: the module was not built).
# Exit 77 (skipped) naming what is missing; the torch tests under TANDEM_TORCH_PYTHON
# (default /opt/peers/bin/python) when it imports torch, else reported skipped.
set -euo pipefail
build=$1
python=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$python" ]; then
  echo "python_module: skipped: the module is not built (configure with -DTANDEM_PYTHON=ON; needs python3-dev and pybind11-dev)"
  exit 77
fi
export PYTHONPATH="$build/python:$here"
"$python" "$here/test_loader.py"
torch_python=${TANDEM_TORCH_PYTHON:-/opt/peers/bin/python}
if [ -x "$torch_python" ] && "$torch_python" -c "import torch" 2>/dev/null; then
  "$torch_python" "$here/test_torch.py"
else
  echo "python_module: torch tests skipped: no torch under $torch_python (TANDEM_TORCH_PYTHON)"
fi
