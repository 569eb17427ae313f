// Dataset's defaults: a label read through get(); class names are the label's number.
#include "tandem/data/dataset.h"

#include "tandem/error.h"

namespace tandem::data {

int64_t Dataset::label(int64_t index) const {
  std::vector<uint8_t> scratch;
  return get(index, scratch).label;
}

std::string Dataset::class_name(int64_t label) const {
  TD_CHECK_ARG(label >= 0 && label < num_classes(), "dataset", "class {} is out of range: expected [0, {})", label,
               num_classes());
  return std::to_string(label);
}

}  // namespace tandem::data
