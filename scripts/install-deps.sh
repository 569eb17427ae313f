#!/usr/bin/env bash
# Installs the Debian packages tandem needs to build, test and train on the default dataset,
# or, given package names, those instead (scripts use it for optional data packages).
# Idempotent: packages already installed are left alone; apt-get update runs only when
# something is missing. Needs root (or sudo) only when it has something to install.
# Usage: scripts/install-deps.sh [PACKAGE...]
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  ccache                 # compiler cache: a second build, CI's clean clone and pip install . reuse objects
  libdnnl-dev            # oneDNN: convolution, matmul, batch norm, pooling on the CPU
  ocl-icd-opencl-dev     # OpenCL headers and loader: Debian's oneDNN CMake config requires them
  zlib1g-dev             # gzip-compressed IDX files
  libturbojpeg0-dev      # JPEG decoding and encoding (libjpeg-turbo's TurboJPEG API)
  libjpeg62-turbo-dev    # JPEG region decoding (libjpeg-turbo's libjpeg API: crop, skip rows)
  libpng-dev             # PNG decoding and encoding
  libsentencepiece-dev   # tokenizer (tandem tokenize), linked only by the module libtandem_sentencepiece.so
  libcli11-dev           # command line
  libtomlplusplus-dev    # run files (tandem train --config run.toml)
  nlohmann-json3-dev     # safetensors headers, Chrome traces
  libfmt-dev             # formatting
  libprotobuf-dev protobuf-compiler  # TensorBoard event files (Event protocol buffers)
  libisal-dev            # CRC32C of TensorBoard records (ISA-L's crc32_iscsi)
  liburing-dev           # the disk tier (--optimizer-state-device disk): io_uring reads and writes
  libcpp-httplib-dev     # the HTTP inference service (tandem serve, tandem train --serve)
  libopenmpi-dev openmpi-bin  # data parallel across processes and machines (mpirun, MPI collectives)
  libgtest-dev libgmock-dev  # tests
  python3-dev pybind11-dev   # the Python module (import tandem; python/, docs/python.md)
  python3-numpy          # the Python module's tests (numpy.from_dlpack)
  dataset-fashion-mnist  # default dataset: /usr/share/datasets/fashion-mnist
  fortunes               # default text corpus for language models (make train-lm): /usr/share/games/fortunes
)
if [ $# -gt 0 ]; then
  packages=("$@")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
  else
    echo "install-deps: need root to install: ${missing[*]} (run as root or install them)" >&2
    exit 2
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
