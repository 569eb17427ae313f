#include "tandem/data/open_dataset.h"

#include "tandem/data/mnist_like.h"

namespace tandem::data {

const char* split_name(Split split) { return split == Split::train ? "train" : "test"; }

std::shared_ptr<const Dataset> open_dataset(const std::string& dir, Split split) {
  return std::make_shared<MnistLike>(dir, split == Split::train ? "train" : "t10k");
}

}  // namespace tandem::data
