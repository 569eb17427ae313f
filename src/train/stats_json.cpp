#include "tandem/train/stats_json.h"

namespace tandem::train {

nlohmann::json epoch_stats_json(const EpochStats& s) {
  return {{"epoch", s.epoch},
          {"train_loss", s.train_loss},
          {"train_accuracy", s.train_accuracy},
          {"test_loss", s.test_loss},
          {"test_accuracy", s.test_accuracy},
          {"images_per_s", s.images_per_s},
          {"seconds", s.seconds},
          {"lr", s.lr},
          {"pinned_peak_bytes", s.pinned_peak_bytes}};
}

}  // namespace tandem::train
