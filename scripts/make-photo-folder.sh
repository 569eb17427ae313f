#!/usr/bin/env bash
# Builds a photo dataset in torchvision's ImageFolder layout for the image pipeline:
#   DIR/train/<class>/*.jpg and DIR/val/<class>/*.jpg, 10 classes, COUNT JPEGs in all
#   (default 5000: 400 train and 100 val per class), 500x375, quality 90.
# Each class is one nature photo of Debian's mate-backgrounds package (installed here when
# missing, idempotently, as install-deps.sh does); its images are deterministic crops of it
# (position, size and flip vary by index), made by bench/make_photo_folder.cpp with tandem's
# own JPEG decoder and encoder. The same COUNT gives the same files byte for byte.
# Usage: scripts/make-photo-folder.sh DIR [COUNT]    (BUILD_DIR: the CMake build, default build)
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 DIR [COUNT]" >&2
  exit 2
fi
dir=$1
count=${2:-5000}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}

package=mate-backgrounds
photos_dir=/usr/share/backgrounds/mate/nature
classes=(Aqua Blinds Dune FreshFlower Garden GreenMeadow LadyBird RainDrops Storm TwoWings)

"$root/scripts/install-deps.sh" "$package"

photos=()
for c in "${classes[@]}"; do
  p="$photos_dir/$c.jpg"
  if [ ! -f "$p" ]; then
    echo "make-photo-folder: $p is missing (expected in package $package)" >&2
    exit 1
  fi
  photos+=("$p")
done

if [ ! -x "$build/make_photo_folder" ]; then
  echo "make-photo-folder: building make_photo_folder in $build"
  cmake --build "$build" --target make_photo_folder -j2 >/dev/null
fi

"$build/make_photo_folder" "$dir" "$count" "${photos[@]}"
