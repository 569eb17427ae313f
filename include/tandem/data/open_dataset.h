// open_dataset: the one place a dataset folder (`--data DIR`) is turned into a Dataset. Today
// it holds MNIST-like IDX files (mnist_like.h: <split>-images-idx3-ubyte[.gz] and
// <split>-labels-idx1-ubyte[.gz], 10 classes); a new on-disk format is recognised here, so the
// trainer and the eval command pick it up without change.
// Thread-safety: reentrant; the returned dataset is as Dataset.
#pragma once

#include <memory>
#include <string>

#include "tandem/data/dataset.h"

namespace tandem::data {

/// Which part of a dataset: the training samples or the held-out test samples.
enum class Split { train, test };

/// "train" or "test".
const char* split_name(Split split);

/// Opens split `split` of the dataset in folder `dir` (IDX: "train" / "t10k" files).
/// Throws as the format's reader does: Error(io) for a missing folder or file (with a hint to
/// install the data), Error(format) for a malformed file, naming it.
std::shared_ptr<const Dataset> open_dataset(const std::string& dir, Split split);

}  // namespace tandem::data
