// Trains a model of one's own (small_convnet.h) on a data set of one's own (stripes_dataset.h)
// with tandem's Trainer: batches loaded by tandem's workers, AdamW, a cosine schedule, test
// accuracy after each epoch. Built against the installed package (CMakeLists.txt).
//   stripes_train [--epochs N] [--samples N] [--threads N] [--device cpu|cuda|virt]
// Prints one line per epoch and exits 0 when every epoch's loss is finite, 1 otherwise, 2 for
// bad arguments or a tandem error.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "small_convnet.h"
#include "stripes_dataset.h"
#include "tandem/error.h"
#include "tandem/train/trainer.h"

int main(int argc, char** argv) {
  tandem::train::TrainConfig cfg;
  int64_t samples = 4096;
  cfg.epochs = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc ||
        (flag != "--epochs" && flag != "--samples" && flag != "--threads" && flag != "--device")) {
      std::fprintf(stderr,
                   "stripes_train: error: unknown flag or missing value '%s' (expected --epochs N, "
                   "--samples N, --threads N, --device D)\n",
                   argv[i]);
      return 2;
    }
    const std::string value = argv[++i];
    if (flag == "--device")
      cfg.device = value;
    else if (flag == "--epochs")
      cfg.epochs = std::atoi(value.c_str());
    else if (flag == "--threads")
      cfg.threads = std::atoi(value.c_str());
    else
      samples = std::atoll(value.c_str());
  }
  try {
    register_small_convnet();
    cfg.model = kSmallConvnet;  // the Trainer builds it by name, sized from the data set
    cfg.batch_size = 64;
    cfg.eval_batch_size = 256;
    cfg.lr = 0.01;
    cfg.optimizer = "adamw";
    cfg.schedule = "cosine";
    cfg.augment = false;  // a flip would turn one diagonal class into the other
    cfg.mean = {0.25f};   // Normalize: the pixels' mean and standard deviation in [0, 1]
    cfg.std = {0.3f};
    cfg.num_workers = 2;
    cfg.progress = 0;
    auto train_set = std::make_shared<StripesDataset>(samples, 1);
    auto test_set = std::make_shared<StripesDataset>(std::max<int64_t>(samples / 4, 1), 2);
    tandem::train::Trainer trainer(cfg, train_set, test_set);
    std::printf("%s\n", trainer.describe().c_str());
    tandem::train::TrainCallbacks cb;
    cb.on_epoch_end = [&](const tandem::train::EpochStats& s) {
      std::printf(
          "epoch %d/%d  train_loss %.4f  train_acc %.2f%%  test_loss %.4f  test_acc %.2f%%  %.0f "
          "img/s\n",
          s.epoch, cfg.epochs, s.train_loss, 100 * s.train_accuracy, s.test_loss,
          100 * s.test_accuracy, s.samples_per_s);
      std::fflush(stdout);
    };
    const tandem::train::TrainResult r = trainer.fit(cb);
    for (const tandem::train::EpochStats& s : r.epochs) {
      if (!std::isfinite(s.train_loss) || !std::isfinite(s.test_loss)) {
        std::fprintf(stderr, "stripes_train: error: epoch %d: the loss is not finite\n", s.epoch);
        return 1;
      }
    }
    std::printf("done: %zu epoch%s, final train_loss %.4f (finite), best test_acc %.2f%%\n",
                r.epochs.size(), r.epochs.size() == 1 ? "" : "s", r.epochs.back().train_loss,
                100 * r.best_test_accuracy);
    return 0;
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "stripes_train: error: %s\n", e.what());
    return 2;
  }
}
