# Sourced by the dist tests: fmnist_cut DIR TRAIN TEST writes the first TRAIN training and TEST
# test samples of Fashion-MNIST into DIR (uncompressed IDX files), or exits 77 (skipped) when
# the data set is not installed. Shell only: a bare machine has no python3.
fmnist_src=/usr/share/datasets/fashion-mnist
# The first N items of an IDX file (gzip): its magic, the count N, the rest of its header
# (HEADER bytes in all) and N items of ITEM bytes.
cut_idx() {  # SRC DST N HEADER ITEM
  local n=$3
  {
    zcat "$1" | head -c 4
    printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((n >> 24 & 255)) $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)))"
    zcat "$1" | tail -c +9 | head -c $(($4 - 8 + n * $5))
  } >"$2"
}
fmnist_cut() {  # DIR TRAIN TEST
  if [ ! -f $fmnist_src/train-images-idx3-ubyte.gz ]; then
    echo "SKIPPED: Fashion-MNIST is not installed ($fmnist_src)"
    exit 77
  fi
  mkdir -p "$1"
  local cut
  for cut in "train $2" "t10k $3"; do
    set -- "$1" $cut
    cut_idx "$fmnist_src/$2-images-idx3-ubyte.gz" "$1/$2-images-idx3-ubyte" "$3" 16 784
    cut_idx "$fmnist_src/$2-labels-idx1-ubyte.gz" "$1/$2-labels-idx1-ubyte" "$3" 8 1
  done
}
