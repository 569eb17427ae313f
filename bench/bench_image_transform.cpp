// Single-thread throughput of ImageTransform's resampling (crop/resize + flip + normalize into
// f32 [3, size, size]) on an RGB image already in memory, i.e. without decoding: the part a
// decoded JPEG goes through. Also the raw [3, H, W] path, which first interleaves the planes.
// Usage: bench_image_transform [width=500] [height=375] [size=224] [seconds=1]
// Prints per path: <path> images_per_s <x> us_per_image <y>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tandem/data/image_transform.h"

namespace {

using namespace tandem::data;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F>
void run(const char* name, double seconds, F&& one) {
  for (int64_t k = 0; k < 20; ++k) one(k);  // grow the scratch buffers
  const double t0 = now_s();
  int64_t n = 0;
  while (now_s() - t0 < seconds)
    for (int64_t k = 0; k < 50; ++k, ++n) one(n);
  const double dt = now_s() - t0;
  std::printf("%s images_per_s %.0f us_per_image %.1f\n", name, n / dt, 1e6 * dt / n);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t w = argc > 1 ? std::atoll(argv[1]) : 500, h = argc > 2 ? std::atoll(argv[2]) : 375;
  const int64_t size = argc > 3 ? std::atoll(argv[3]) : 224;
  const double seconds = argc > 4 ? std::atof(argv[4]) : 1.0;
  std::vector<uint8_t> hwc(static_cast<size_t>(w * h * 3)), chw(hwc.size());
  for (size_t i = 0; i < hwc.size(); ++i) hwc[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t p = 0; p < w * h; ++p)
      chw[static_cast<size_t>(c * w * h + p)] = hwc[static_cast<size_t>(p * 3 + c)];
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
  }
  return 0;
}
