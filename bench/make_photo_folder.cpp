// Builds an image folder in torchvision's ImageFolder layout from a few photos: every photo
// is a class, and its images are deterministic crops of it (position, size and horizontal
// flip drawn from a hash of the class and the image index), resized to 500x375 and written
// as JPEG quality 90. Every fifth image of a class (index % 5 == 4) goes to val/, the rest to
// train/:  OUT/train/<class>/<class>_<index>.jpg, OUT/val/<class>/<class>_<index>.jpg.
// The class name is the photo's file name without extension, in lower case. Files are
// written to a temporary name and renamed, so an interrupted run leaves no half-written image.
// Usage: make_photo_folder OUT COUNT PHOTO...   (COUNT images in all, spread over the classes)
// Prints: make_photo_folder: wrote <files> files (<train> train, <val> val), <bytes> bytes, into OUT
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tandem/data/image_codec.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;
namespace fs = std::filesystem;

namespace {

constexpr int kOutWidth = 500, kOutHeight = 375, kQuality = 90;
constexpr double kMaxZoom = 3.0;  // the largest crop is 3x the output in each direction

struct Rgb {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // [height, width, 3]
};

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }  // [0, 1)

// Decodes a photo at the smallest JPEG scale that keeps it at least kMaxZoom x the output.
Rgb load_photo(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TD_CHECK(f.good(), ErrorCode::io, "make_photo_folder", "cannot open {}", path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const ImageInfo info = read_image_info(bytes.data(), bytes.size(), path.c_str());
  const ImageScale scale = info.encoding == Encoding::jpeg
                               ? jpeg_scale_for(info.width, info.height, static_cast<int>(kOutWidth * kMaxZoom),
                                                static_cast<int>(kOutHeight * kMaxZoom))
                               : ImageScale{};
  Rgb img;
  const ImageInfo d = decode_image(bytes.data(), bytes.size(), path.c_str(), scale, img.pixels);
  img.width = d.width;
  img.height = d.height;
  TD_CHECK(img.width >= kOutWidth && img.height >= kOutHeight, ErrorCode::invalid_argument, "make_photo_folder",
           "{} is {}x{}, smaller than the {}x{} output", path, img.width, img.height, kOutWidth, kOutHeight);
  return img;
}

// One output coordinate's source pixels and weights: a triangle filter as wide as the
// reduction (antialiased bilinear, as Pillow's BILINEAR resize), clamped to the image.
struct Taps {
  int first = 0;
  std::vector<float> weights;
};

std::vector<Taps> filter_taps(double start, double length, int out, int limit) {
  const double step = length / out, support = std::max(1.0, step);
  std::vector<Taps> taps(static_cast<size_t>(out));
  for (int i = 0; i < out; ++i) {
    const double center = start + (i + 0.5) * step - 0.5;
    const int lo = std::max(0, static_cast<int>(std::ceil(center - support)));
    const int hi = std::min(limit - 1, static_cast<int>(std::floor(center + support)));
    Taps& t = taps[static_cast<size_t>(i)];
    t.first = lo;
    double sum = 0;
    for (int j = lo; j <= hi; ++j) {
      const double w = std::max(0.0, 1.0 - std::abs(j - center) / support);
      t.weights.push_back(static_cast<float>(w));
      sum += w;
    }
    for (float& w : t.weights) w = static_cast<float>(w / sum);
  }
  return taps;
}

// Resamples the region (x0, y0, rw, rh) of `src` to kOutWidth x kOutHeight, mirrored when `flip`.
std::vector<uint8_t> crop_resize(const Rgb& src, double x0, double y0, double rw, double rh, bool flip) {
  const std::vector<Taps> cols = filter_taps(x0, rw, kOutWidth, src.width);
  const std::vector<Taps> rows = filter_taps(y0, rh, kOutHeight, src.height);
  const int r0 = rows.front().first;
  const int r1 = rows.back().first + static_cast<int>(rows.back().weights.size());
  std::vector<float> tmp(static_cast<size_t>(r1 - r0) * kOutWidth * 3);  // horizontal pass
  for (int y = r0; y < r1; ++y)
    for (int x = 0; x < kOutWidth; ++x) {
      const Taps& t = cols[static_cast<size_t>(x)];
      float acc[3] = {0, 0, 0};
      for (size_t k = 0; k < t.weights.size(); ++k) {
        const uint8_t* p = &src.pixels[(static_cast<size_t>(y) * src.width + t.first + k) * 3];
        for (int c = 0; c < 3; ++c) acc[c] += t.weights[k] * p[c];
      }
      const int ox = flip ? kOutWidth - 1 - x : x;
      for (int c = 0; c < 3; ++c) tmp[(static_cast<size_t>(y - r0) * kOutWidth + ox) * 3 + c] = acc[c];
    }
  std::vector<uint8_t> out(static_cast<size_t>(kOutWidth) * kOutHeight * 3);
  for (int y = 0; y < kOutHeight; ++y) {
    const Taps& t = rows[static_cast<size_t>(y)];
    for (int i = 0; i < kOutWidth * 3; ++i) {
      float acc = 0;
      for (size_t k = 0; k < t.weights.size(); ++k)
        acc += t.weights[k] * tmp[(static_cast<size_t>(t.first - r0) + k) * kOutWidth * 3 + i];
      out[static_cast<size_t>(y) * kOutWidth * 3 + i] = static_cast<uint8_t>(std::clamp(std::lround(acc), 0L, 255L));
    }
  }
  return out;
}

void write_atomically(const fs::path& path, const std::vector<uint8_t>& bytes) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    TD_CHECK(f.good(), ErrorCode::io, "make_photo_folder", "cannot write {}", tmp.string());
  }
  fs::rename(tmp, path);
}

std::string class_name(const std::string& path) {
  std::string s = fs::path(path).stem().string();
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: make_photo_folder OUT COUNT PHOTO...  (one class per photo)\n");
    return 2;
  }
  const fs::path out_dir = argv[1];
  const long count = std::atol(argv[2]);
  const int classes = argc - 3;
  if (count < classes) {
    std::fprintf(stderr, "make_photo_folder: COUNT must be at least the number of photos (%d), got %s\n", classes,
                 argv[2]);
    return 2;
  }
  try {
    int64_t files = 0, val = 0;
    uintmax_t bytes = 0;
    for (int c = 0; c < classes; ++c) {
      const std::string path = argv[3 + c], name = class_name(path);
      const Rgb photo = load_photo(path);
      const double zoom_max = std::min({kMaxZoom, static_cast<double>(photo.width) / kOutWidth,
                                        static_cast<double>(photo.height) / kOutHeight});
      const long n = count / classes + (c < count % classes ? 1 : 0);
      for (const char* split : {"train", "val"}) fs::create_directories(out_dir / split / name);
      for (long i = 0; i < n; ++i) {
        const uint64_t h = splitmix64((static_cast<uint64_t>(c) << 32) | static_cast<uint64_t>(i));
        const double zoom = 1.0 + unit(splitmix64(h ^ 1)) * (zoom_max - 1.0);
        const double rw = kOutWidth * zoom, rh = kOutHeight * zoom;
        const double x0 = unit(splitmix64(h ^ 2)) * (photo.width - rw);
        const double y0 = unit(splitmix64(h ^ 3)) * (photo.height - rh);
        const std::vector<uint8_t> rgb = crop_resize(photo, x0, y0, rw, rh, (h & 1) != 0);
        const std::vector<uint8_t> jpeg = encode_jpeg(rgb.data(), kOutWidth, kOutHeight, kQuality);
        const bool is_val = i % 5 == 4;
        char file[64];
        std::snprintf(file, sizeof(file), "%s_%05ld.jpg", name.c_str(), i);
        write_atomically(out_dir / (is_val ? "val" : "train") / name / file, jpeg);
        ++files, val += is_val;
        bytes += jpeg.size();
      }
    }
    std::printf("make_photo_folder: wrote %lld files (%lld train, %lld val), %ju bytes, into %s\n",
                static_cast<long long>(files), static_cast<long long>(files - val), static_cast<long long>(val), bytes,
                out_dir.string().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_photo_folder: %s\n", e.what());
    return 1;
  }
  return 0;
}
