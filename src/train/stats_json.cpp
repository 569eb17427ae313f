#include "tandem/train/stats_json.h"

namespace tandem::train {

nlohmann::json epoch_stats_json(const EpochStats& s) {
  nlohmann::json j = {{"epoch", s.epoch},
          {"train_loss", s.train_loss},
          {"train_accuracy", s.train_accuracy},
          {"test_loss", s.test_loss},
          {"test_accuracy", s.test_accuracy},
          {"images_per_s", s.samples_per_s},
          {"seconds", s.seconds},
          {"lr", s.lr},
          {"pinned_peak_bytes", s.pinned_peak_bytes}};
  if (s.pinned_allocated_bytes + s.pageable_allocated_bytes > 0) {
    j["pinned_allocated_bytes"] = s.pinned_allocated_bytes;
    j["pageable_allocated_bytes"] = s.pageable_allocated_bytes;
  }
  if (s.tokens_per_s > 0) j["tokens_per_s"] = s.tokens_per_s;  // token data only
  return j;
}

}  // namespace tandem::train
