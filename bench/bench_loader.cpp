// Loader throughput on Fashion-MNIST train with the reference augmentation (pad 2, random
// crop 28, flip p=0.5, normalize), batch_size 128, shuffle, drop_last, as in
// /work/shared/peers/torch_loader.py. Prints one line per num_workers:
//   loader num_workers <w> img_per_s <images per second>
// Usage: bench_loader [data_dir] [epochs]   (one untimed warm-up epoch, then `epochs` timed)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tandem/data/fused_image_transform.h"
#include "tandem/data/loader.h"
#include "tandem/data/mnist_like.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : kDefaultFashionMnistDir;
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 5;
  try {
    auto dataset = std::make_shared<MnistLike>(dir, "train");
    auto transform = std::make_shared<FusedImageTransform>(FusedImageTransform::fashion_mnist_train());
    for (int workers : {0, 1, 2}) {
      LoaderOptions o;
      o.batch_size = 128;
      o.num_workers = workers;
      o.shuffle = true;
      o.drop_last = true;
      Loader loader(dataset, transform, o);
      double checksum = 0.0;  // reads one value per batch so the work cannot be skipped
      auto run = [&](uint64_t epoch) {
        int64_t n = 0;
        loader.begin_epoch(epoch);
        Batch b;
        while (loader.next(b)) {
          n += b.size();
          checksum += b.input().data<float>()[b.input().numel() - 1];
        }
        return n;
      };
      run(0);
      const auto t0 = std::chrono::steady_clock::now();
      int64_t images = 0;
      for (int e = 1; e <= epochs; ++e) images += run(static_cast<uint64_t>(e));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("loader num_workers %d img_per_s %.0f\n", workers, static_cast<double>(images) / s);
      std::fprintf(stderr, "(checksum %.3f)\n", checksum);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.code() == ErrorCode::io || e.code() == ErrorCode::invalid_argument ? 2 : 1;
  }
  return 0;
}
