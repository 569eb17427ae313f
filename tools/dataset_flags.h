// The dataset flags `tandem pack` and `tandem inspect` share: --format, --label, --val-split,
// --seed, --no-verify, turned into data::DatasetOptions.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "tandem/data/open_dataset.h"

namespace tandem::tools {

struct DatasetFlags {
  std::string format = "auto";
  std::string label = "fine";
  double val_split = 0;
  uint64_t seed = 0;
  bool no_verify = false;
  /// Throws Error(invalid_argument) for an unknown format or label.
  data::DatasetOptions options() const;
};

void add_dataset_flags(CLI::App* c, DatasetFlags& flags);

}  // namespace tandem::tools
