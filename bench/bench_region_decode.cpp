// Single-thread throughput on a folder of real JPEGs (read into memory first) of:
//   decode_full    decode_image at scale 1 (the raw decode rate a loader worker can reach)
//   train_whole    RandomResizedCrop + flip + normalize, decoding the whole image at the DCT
//                  scale the box allows, then resampling the box (ImageTransform before region
//                  decoding; equal outputs)
//   header         read_image_info
//   region_only    decode_image_region of the train box's region (plus 2 pixels), no resampling
//   region_full    decode_image_region of the whole image (the libjpeg path against TurboJPEG)
//   train_region   ImageTransform::apply_sample (decodes only the box's region)
//   eval_region    the same for the evaluation transform
// Usage: bench_region_decode <folder of .jpg files, searched recursively> [size=224]
//        [seconds=2] [max_files=2000]
// Prints per path: <path> images_per_cpu_s <x> us_per_image <y>, and the ratio of
// train_region to decode_full, from the thread's CPU time.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tandem/data/image_codec.h"
#include "tandem/data/image_transform.h"

namespace {

using namespace tandem::data;

double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

template <typename F>
double run(const char* name, double seconds, size_t files, F&& one) {
  for (size_t k = 0; k < std::min<size_t>(files, 50); ++k) one(k);  // grow the scratch buffers
  const double c0 = cpu_s();
  int64_t n = 0;
  while (cpu_s() - c0 < seconds)
    for (int64_t k = 0; k < 50; ++k, ++n) one(static_cast<size_t>(n));
  const double dc = cpu_s() - c0, rate = static_cast<double>(n) / dc;
  std::printf("%-13s images_per_cpu_s %.0f us_per_image %.1f\n", name, rate, 1e6 / rate);
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <jpeg folder> [size] [seconds] [max_files]\n", argv[0]);
    return 2;
  }
  const int64_t size = argc > 2 ? std::atoll(argv[2]) : 224;
  const double seconds = argc > 3 ? std::atof(argv[3]) : 2.0;
  const size_t max_files = argc > 4 ? static_cast<size_t>(std::atoll(argv[4])) : 2000;
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::recursive_directory_iterator(argv[1]))
    if (e.is_regular_file() && e.path().extension() == ".jpg") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  if (paths.size() > max_files) paths.resize(max_files);
  std::vector<std::vector<uint8_t>> files;
  size_t bytes = 0;
  for (const std::string& p : paths) {
    std::ifstream f(p, std::ios::binary);
    files.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    bytes += files.back().size();
  }
  if (files.empty()) {
    std::fprintf(stderr, "no .jpg files under %s\n", argv[1]);
    return 2;
  }
  std::printf("%zu files, %.1f KiB mean, output 3x%lldx%lld\n", files.size(),
              static_cast<double>(bytes) / 1024.0 / static_cast<double>(files.size()),
              static_cast<long long>(size), static_cast<long long>(size));
  const size_t nf = files.size();
  std::vector<uint8_t> rgb;
  std::vector<float> out(static_cast<size_t>(3 * size * size)), work;
  const double full = run("decode_full", seconds, nf, [&](size_t k) {
    const auto& f = files[k % nf];
    decode_image(f.data(), f.size(), "x.jpg", ImageScale{}, rgb);
  });
  ImageTransformOptions o;
  o.size = size;
  const ImageTransform train(o);
  run("train_whole", seconds, nf, [&](size_t k) {
    const auto& f = files[k % nf];
    const ImageInfo info = read_image_info(f.data(), f.size(), "x.jpg");
    const ImageSampleParams p =
        train.params({1, 0, static_cast<int64_t>(k)}, info.width, info.height);
    const ImageScale s = jpeg_scale_for(p.w, p.h, static_cast<int>(size), static_cast<int>(size));
    const ImageInfo d = decode_image(f.data(), f.size(), "x.jpg", s, rgb);
    const double fx = static_cast<double>(d.width) / info.width;
    const double fy = static_cast<double>(d.height) / info.height;
    const auto x0 = std::min<int64_t>(std::llround(p.x * fx), d.width - 1);
    const auto y0 = std::min<int64_t>(std::llround(p.y * fy), d.height - 1);
    const auto x1 = std::clamp<int64_t>(std::llround((p.x + p.w) * fx), x0 + 1, d.width);
    const auto y1 = std::clamp<int64_t>(std::llround((p.y + p.h) * fy), y0 + 1, d.height);
    const RgbView view{rgb.data() + (y0 * d.width + x0) * 3, x1 - x0, y1 - y0,
                       int64_t{d.width} * 3};
    const ResampleBox box{p.x * fx - static_cast<double>(x0), p.y * fy - static_cast<double>(y0),
                          p.w * fx / static_cast<double>(size),
                          p.h * fy / static_cast<double>(size)};
    resample_rgb_to_chw(view, box, size, size, p.flip, train.affine(), out.data(), work);
  });
  run("header", seconds, nf, [&](size_t k) {
    const auto& f = files[k % nf];
    read_image_info(f.data(), f.size(), "x.jpg");
  });
  run("region_only", seconds, nf, [&](size_t k) {
    const auto& f = files[k % nf];
    const ImageInfo info = read_image_info(f.data(), f.size(), "x.jpg");
    const ImageSampleParams p =
        train.params({1, 0, static_cast<int64_t>(k)}, info.width, info.height);
    const ImageScale s = jpeg_scale_for(p.w, p.h, static_cast<int>(size), static_cast<int>(size));
    const int dw = s.scaled(info.width), dh = s.scaled(info.height);
    const double fx = static_cast<double>(dw) / info.width;
    const double fy = static_cast<double>(dh) / info.height;
    const int x0 = std::max(0, static_cast<int>(p.x * fx) - 2);
    const int y0 = std::max(0, static_cast<int>(p.y * fy) - 2);
    const int x1 = std::min(dw, static_cast<int>((p.x + p.w) * fx) + 3);
    const int y1 = std::min(dh, static_cast<int>((p.y + p.h) * fy) + 3);
    ImageRegion got;
    decode_image_region(f.data(), f.size(), "x.jpg", s, {x0, y0, x1 - x0, y1 - y0}, rgb, got);
  });
  run("region_full", seconds, nf, [&](size_t k) {
    const auto& f = files[k % nf];
    const ImageInfo info = read_image_info(f.data(), f.size(), "x.jpg");
    ImageRegion got;
    decode_image_region(f.data(), f.size(), "x.jpg", {}, {0, 0, info.width, info.height}, rgb, got);
  });
  TransformScratch scratch;
  const double region = run("train_region", seconds, nf, [&](size_t k) {
    const auto& f = files[k % nf];
    Sample s;
    s.pixels = f.data(), s.size = f.size(), s.encoding = Encoding::jpeg;
    train.apply_sample(s, {3, 0, 0}, out.data(), {1, 0, static_cast<int64_t>(k)}, scratch);
  });
  o.mode = ImageTransformMode::eval;
  o.resize_size = size * 8 / 7;
  const ImageTransform eval(o);
  run("eval_region", seconds, nf, [&](size_t k) {
    const auto& f = files[k % nf];
    Sample s;
    s.pixels = f.data(), s.size = f.size(), s.encoding = Encoding::jpeg;
    eval.apply_sample(s, {3, 0, 0}, out.data(), {1, 0, static_cast<int64_t>(k)}, scratch);
  });
  std::printf("train_region / decode_full %.2f\n", region / full);
  return 0;
}
