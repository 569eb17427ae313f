# The build-machine step of scripts/gpu-check.sh (--prepare): sourced by it, not run alone.
# Uses the settings gpu-check.sh defines (root, arch, limit_mib) and find_lib_dir.

prepare() {
  local build=${1:-$root/build-gpu}
  local carry=$root/build-gpu-carry
  local cache=$build/CMakeCache.txt
  if [ -f "$cache" ]; then
    grep -q '^TANDEM_CUDA:BOOL=ON' "$cache" ||
      { echo "gpu-check: $build is configured without CUDA: use another folder or -DTANDEM_CUDA=ON" >&2; exit 2; }
    grep -q "^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=$arch\$" "$cache" ||
      { echo "gpu-check: $build is not configured for exactly $arch ($(grep '^CMAKE_CUDA_ARCHITECTURES' "$cache")): use another folder" >&2; exit 2; }
  else
    local launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
      -DTANDEM_BENCH=ON "${launcher[@]}" || exit 2
  fi
  cmake --build "$build" -j"${GPU_CHECK_JOBS:-2}" --target test_cuda tandem bench_resnet serve_load || exit 2
  rm -rf "$carry"
  mkdir -p "$carry/lib" "$carry/data"
  local bins=(test_cuda tandem bench_resnet serve_load) b
  for b in "${bins[@]}"; do
    cp "$build/$b" "$carry/"
    strip --strip-unneeded "$carry/$b" 2>/dev/null || true
  done
  # Shared libraries: everything ldd resolves, except the driver, glibc, the C++ runtime and
  # the large CUDA math libraries, which the GPU machine has in a matching or newer version.
  local skip='^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl\.|librt\.|libutil|libstdc\+\+|libgcc_s|libcuda\.|libnvidia|libcublas|libcublasLt|libcudnn|libnccl)'
  for b in "${bins[@]}"; do
    ldd "$build/$b" | awk '/=> \// { print $1, $3 }'
  done | sort -u | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    cp -L "$path" "$carry/lib/$name"
  done
  # Libraries over 4 MiB travel gzipped (oneDNN: 38 MiB, 11 MiB gzipped); the check unpacks them.
  local big
  for big in $(find "$carry/lib" -type f -size +4M); do gzip -9 "$big"; done
  # Fashion-MNIST: the 10k test split serves as both splits (a smoke run, not a score); the
  # training split is a relative link to it, which travels as a link (4 MiB less to carry).
  local ds=/usr/share/datasets/fashion-mnist kind
  if [ -f "$ds/t10k-images-idx3-ubyte.gz" ]; then
    for kind in images-idx3 labels-idx1; do
      cp "$ds/t10k-$kind-ubyte.gz" "$carry/data/t10k-$kind-ubyte.gz"
      ln -s "t10k-$kind-ubyte.gz" "$carry/data/train-$kind-ubyte.gz"
    done
  else
    echo "gpu-check: $ds not found: the training run, and so the check, will fail there" >&2
  fi
  # A small photo folder for the image pipeline's run (the full 5,000 would not fit the carry).
  if BUILD_DIR="${GPU_CHECK_PHOTO_BUILD:-$root/build}" "$root/scripts/make-photo-folder.sh" "$carry/photos" 400 \
      > "$carry/photos.log" 2>&1; then
    echo "gpu-check: photo folder: $(tail -n 1 "$carry/photos.log")"
  else
    echo "gpu-check: making the photo folder failed (the photo run, and so the check, will fail there):" >&2
    tail -n 3 "$carry/photos.log" >&2
    rm -rf "$carry/photos"
  fi
  # Token shards for the GPT run: Debian's fortunes tokenized (SentencePiece BPE, 4,096 tokens;
  # about 1.6 MB of u16 ids) by this machine's tandem, so the GPU machine needs no tokenizer.
  local tok_build=${GPU_CHECK_PHOTO_BUILD:-$root/build} fortunes=/usr/share/games/fortunes
  local -a corpus=()
  [ -d "$fortunes" ] && mapfile -t corpus < <(find "$fortunes" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | LC_ALL=C sort)
  if [ ${#corpus[@]} -gt 0 ] && [ -x "$tok_build/tandem" ] &&
     "$tok_build/tandem" tokenize --corpus "${corpus[@]}" --out "$carry/tokens" --vocab-size 4096 > "$carry/tokens.log" 2>&1; then
    rm -f "$carry/tokens/tokenizer.model"
    echo "gpu-check: token shards: $(tail -n 1 "$carry/tokens.log")"
  else
    echo "gpu-check: tokenizing $fortunes with $tok_build/tandem failed (the GPT run, and so the check, will fail there):" >&2
    tail -n 3 "$carry/tokens.log" >&2 2>/dev/null
    rm -rf "$carry/tokens"
  fi
  # The GPU code: machine code for $arch only (no PTX to JIT, no other architecture).
  local objdump
  objdump=$(command -v cuobjdump || { [ -x /usr/local/cuda/bin/cuobjdump ] && echo /usr/local/cuda/bin/cuobjdump; })
  if [ -n "$objdump" ]; then
    echo "gpu-check: GPU code in test_cuda: $("$objdump" --list-elf "$carry/test_cuda" 2>/dev/null |
      grep -o 'sm_[0-9a-z]*' | sort | uniq -c | tr -s ' \n' ' ')"
  else
    echo "gpu-check: GPU code: CMAKE_CUDA_ARCHITECTURES=$arch (cuobjdump not installed here to list it)"
  fi
  local kib mib tree_kib
  kib=$(du -sk "$carry" | awk '{print $1}')
  mib=$(( (kib + 1023) / 1024 ))
  tree_kib=$(git -C "$root" ls-files -z 2>/dev/null | (cd "$root" && xargs -0 du -ck 2>/dev/null) | tail -1 | awk '{print $1}')
  echo "gpu-check: prepared $carry: ${bins[*]}, $(ls "$carry/lib" | wc -l) libraries, $("$build/test_cuda" --gtest_list_tests | grep -c '^  ') tests"
  ls "$carry/lib" | sed 's/^/  lib: /'
  echo "gpu-check: carry size: $mib MiB ($kib KiB; limit ${limit_mib} MiB); with the tracked files (${tree_kib:-?} KiB) $(( (kib + ${tree_kib:-0} + 1023) / 1024 )) MiB of the 64 MiB that travel"
  if [ "$mib" -gt "$limit_mib" ]; then
    echo "gpu-check: $mib MiB is over the ${limit_mib} MiB budget of the carry" >&2
    exit 1
  fi
  echo "gpu-check: on the GPU machine run: scripts/gpu-check.sh   (carry: build-gpu-carry)"
}

