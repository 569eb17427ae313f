#!/usr/bin/env bash
# The C++ package end to end: installs the build to a scratch prefix under the build folder,
# configures and builds examples/cpp against that installed package (CMAKE_PREFIX_PATH only,
# no package registry: never the build tree), and trains it for one short epoch, which must
# report a finite loss. The prefix and the example's build folder are kept, so that a second
# run (make test-floor) installs and rebuilds only what changed.
# Usage: install_example.sh SOURCE_DIR BUILD_DIR GENERATOR CXX_COMPILER [COMPILER_LAUNCHER]
set -euo pipefail
src=$1 build=$2 generator=$3 cxx=$4 launcher=${5:-}
work=$build/package-test
prefix=$work/prefix
mkdir -p "$work"

if ! cmake --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1; then
  tail -5 "$work/install.log" >&2
  echo "install_example: cmake --install $build failed (is the whole build done?)" >&2
  exit 1
fi
for f in include/tandem/train/trainer.h include/tandem/nn/models.h lib/cmake/tandem/tandemConfig.cmake \
         lib/cmake/tandem/tandemConfigVersion.cmake lib/cmake/tandem/tandemTargets.cmake \
         lib/libtandem_sentencepiece.so; do
  [ -f "$prefix/$f" ] || { echo "install_example: $prefix/$f was not installed" >&2; exit 1; }
done
# The installed program finds the tokenizer module in its ../lib (the README as the corpus).
if [ -x "$prefix/bin/tandem" ]; then
  tok=$(env -u TANDEM_SENTENCEPIECE_MODULE "$prefix/bin/tandem" tokenize --corpus "$src/README.md" \
        --out "$work/tok" --vocab-size 1000 2>&1) ||
    { echo "$tok" >&2; echo "install_example: the installed tandem could not tokenize" >&2; exit 1; }
  echo "$tok" | grep -q 'vocab 1000' || { echo "$tok" >&2; echo "install_example: expected 'vocab 1000'" >&2; exit 1; }
fi

cmake -S "$src/examples/cpp" -B "$work/example" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"} \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON \
  -DCMAKE_FIND_PACKAGE_NO_SYSTEM_PACKAGE_REGISTRY=ON > "$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; echo "install_example: configuring examples/cpp failed" >&2; exit 1; }
found=$(sed -n 's/^tandem_DIR:PATH=//p' "$work/example/CMakeCache.txt")
if [ "$found" != "$prefix/lib/cmake/tandem" ]; then
  echo "install_example: examples/cpp found tandem in '$found', expected the installed $prefix/lib/cmake/tandem" >&2
  exit 1
fi
cmake --build "$work/example" > "$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log" >&2; echo "install_example: building examples/cpp failed" >&2; exit 1; }

out=$("$work/example/stripes_train" --epochs 1 --samples 1024 --threads 1)
echo "$out"
echo "$out" | grep -Eq '^epoch 1/1  train_loss [0-9]+\.[0-9]+  ' ||
  { echo "install_example: expected an epoch line with a finite train_loss" >&2; exit 1; }
echo "$out" | grep -q '^done: 1 epoch, final train_loss .* (finite)' ||
  { echo "install_example: expected the done line" >&2; exit 1; }
