// Single-thread throughput of ImageTransform's resampling (crop/resize + flip + normalize into
// f32 [3, size, size]) on an RGB image already in memory, i.e. without decoding: the part a
// decoded JPEG goes through. Also the raw [3, H, W] path, which first interleaves the planes,
// and whole JPEG samples (quality 90, decoded at a DCT scale where the box allows).
// Usage: bench_image_transform [width=500] [height=375] [size=224] [seconds=1]
// Prints per path: <path> images_per_cpu_s <x> us_per_image <y> (wall: images_per_s <z>), the
// first two from the thread's CPU time (robust on a shared machine).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "tandem/data/image_codec.h"
#include "tandem/data/image_transform.h"

namespace {

using namespace tandem::data;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// This thread's CPU time: on a shared machine, the time the work itself took.
double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

template <typename F>
void run(const char* name, double seconds, F&& one) {
  for (int64_t k = 0; k < 20; ++k) one(k);  // grow the scratch buffers
  const double t0 = now_s(), c0 = cpu_s();
  int64_t n = 0;
  while (now_s() - t0 < seconds)
    for (int64_t k = 0; k < 50; ++k, ++n) one(n);
  const double dt = now_s() - t0, dc = cpu_s() - c0;
  std::printf("%s images_per_cpu_s %.0f us_per_image %.1f (wall: images_per_s %.0f)\n", name,
              n / dc, 1e6 * dc / n, n / dt);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t w = argc > 1 ? std::atoll(argv[1]) : 500, h = argc > 2 ? std::atoll(argv[2]) : 375;
  const int64_t size = argc > 3 ? std::atoll(argv[3]) : 224;
  const double seconds = argc > 4 ? std::atof(argv[4]) : 1.0;
  std::vector<uint8_t> hwc(static_cast<size_t>(w * h * 3)), chw(hwc.size());
  // Photo-like content: smooth shapes per channel plus +-8 levels of noise.
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t c = 0; c < 3; ++c) {
        const double smooth = 128 + 90 * std::sin(0.021 * x * (c + 1)) * std::cos(0.017 * y + c);
        const auto noise =
            static_cast<int>(static_cast<uint32_t>((y * w + x) * 3 + c) * 2654435761u >> 28) - 8;
        hwc[static_cast<size_t>((y * w + x) * 3 + c)] =
            static_cast<uint8_t>(std::clamp(smooth + noise, 0.0, 255.0));
      }
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t p = 0; p < w * h; ++p)
      chw[static_cast<size_t>(c * w * h + p)] = hwc[static_cast<size_t>(p * 3 + c)];
  const std::vector<uint8_t> jpeg =
      encode_jpeg(hwc.data(), static_cast<int>(w), static_cast<int>(h), 90);
  std::printf("image %lldx%lld, jpeg %zu bytes, output 3x%lldx%lld\n", static_cast<long long>(w),
              static_cast<long long>(h), jpeg.size(), static_cast<long long>(size),
              static_cast<long long>(size));
  std::vector<float> out(static_cast<size_t>(3 * size * size));
  std::vector<float> work;
  for (const ImageTransformMode mode : {ImageTransformMode::train, ImageTransformMode::eval}) {
    ImageTransformOptions o;
    o.mode = mode;
    o.size = size;
    o.resize_size = size * 8 / 7;
    const ImageTransform t(o);
    const bool train = mode == ImageTransformMode::train;
    // The RGB path: the box and flip as ImageTransform draws them, then the resampler.
    run(train ? "train_rgb" : "eval_rgb", seconds, [&](int64_t k) {
      const ImageSampleParams p = t.params({1, 0, k}, w, h);
      RgbView view{hwc.data(), w, h, w * 3};
      ResampleBox box{p.x, p.y, p.w / size, p.h / size};
      if (p.clip_to_box) {
        view.pixels += (static_cast<int64_t>(p.y) * w + static_cast<int64_t>(p.x)) * 3;
        view.width = static_cast<int64_t>(p.w), view.height = static_cast<int64_t>(p.h);
        box.x0 = box.y0 = 0.0;
      }
      resample_rgb_to_chw(view, box, size, size, p.flip, t.affine(), out.data(), work);
    });
    TransformScratch scratch;
    Sample s;
    s.pixels = chw.data();
    run(train ? "train_raw_chw" : "eval_raw_chw", seconds, [&](int64_t k) {
      t.apply_sample(s, {3, h, w}, out.data(), {1, 0, k}, scratch);
    });
    Sample j;
    j.pixels = jpeg.data();
    j.size = jpeg.size();
    j.encoding = Encoding::jpeg;
    run(train ? "train_jpeg" : "eval_jpeg", seconds, [&](int64_t k) {
      t.apply_sample(j, {3, 0, 0}, out.data(), {1, 0, k}, scratch);
    });
  }
  return 0;
}
