// Dataset's default class names: the label's number.
#include "tandem/data/dataset.h"

#include "tandem/error.h"

namespace tandem::data {

std::string Dataset::class_name(int64_t label) const {
  TD_CHECK_ARG(label >= 0 && label < num_classes(), "dataset", "class {} is out of range: expected [0, {})", label,
               num_classes());
  return std::to_string(label);
}

}  // namespace tandem::data
