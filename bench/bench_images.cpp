// The image pipeline's throughput: decode + RandomResizedCrop 224 + flip + normalize into
// batch slots (batch 64, shuffle, drop_last) on 1 and 2 loader workers, from an image folder
// and from its packed copy, against the ceiling: the raw libjpeg-turbo full-size decode rate
// of the same files on one thread (decode_image at scale 1), times the workers.
// Prints:
//   images decode_full_1thread img_per_s R   (the raw rate; ceiling for W workers = W * R)
//   images source folder|packed workers W img_per_s X ceiling_ratio X/(W*R)
// Usage: bench_images FOLDER PACKED [seconds per figure, default 4] [size, default 224]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tandem/data/image_codec.h"
#include "tandem/data/image_transform.h"
#include "tandem/data/loader.h"
#include "tandem/data/open_dataset.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Full-size decodes of the set's samples in order, one thread, for at least `seconds`.
static double decode_rate(const Dataset& set, double seconds) {
  std::vector<uint8_t> bytes, rgb;
  int64_t n = 0;
  const auto t0 = Clock::now();
  while (seconds_since(t0) < seconds) {
    for (int64_t i = 0; i < 64; ++i, ++n) {
      const Sample s = set.get(n % set.size(), bytes);
      decode_image(s.pixels, s.size, s.source, ImageScale{}, rgb);
    }
  }
  return static_cast<double>(n) / seconds_since(t0);
}

// Batches from a loader with `workers` workers for at least `seconds`, after one warm-up batch.
static double pipeline_rate(const std::shared_ptr<const Dataset>& set, int workers, int64_t size, double seconds) {
  ImageTransformOptions to;
  to.size = size;
  LoaderOptions o;
  o.batch_size = 64;
  o.num_workers = workers;
  o.prefetch_factor = 4;
  o.shuffle = true;
  o.drop_last = true;
  Loader loader(set, std::make_shared<ImageTransform>(to), o);
  double checksum = 0;  // one value per batch, so no work can be skipped
  int64_t n = 0;
  uint64_t epoch = 0;
  Batch b;
  loader.begin_epoch(epoch);
  loader.next(b);  // warm-up: workers started, buffers grown
  auto t0 = Clock::now();
  while (seconds_since(t0) < seconds) {
    if (!loader.next(b)) {
      loader.begin_epoch(++epoch);
      continue;
    }
    n += b.size();
    checksum += b.input().data<float>()[b.input().numel() - 1];
  }
  std::fprintf(stderr, "(checksum %.3f)\n", checksum);
  return static_cast<double>(n) / seconds_since(t0);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_images FOLDER PACKED [seconds] [size]\n");
    return 2;
  }
  const double seconds = argc > 3 ? std::atof(argv[3]) : 4.0;
  const int64_t size = argc > 4 ? std::atoll(argv[4]) : 224;
  try {
    const auto folder = open_dataset(argv[1], Split::train);
    const auto packed = open_dataset(argv[2], Split::train);
    const double raw = decode_rate(*folder, seconds);
    std::printf("images decode_full_1thread img_per_s %.0f\n", raw);
    std::fflush(stdout);
    for (const auto& [name, set] : {std::pair{"folder", folder}, std::pair{"packed", packed}}) {
      for (int workers : {1, 2}) {
        const double r = pipeline_rate(set, workers, size, seconds);
        std::printf("images source %s workers %d size %lld img_per_s %.0f ceiling_ratio %.2f\n", name, workers,
                    static_cast<long long>(size), r, r / (workers * raw));
        std::fflush(stdout);
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return 0;
}
