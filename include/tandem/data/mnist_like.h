// MnistLike: an in-memory image classification dataset read from a pair of IDX files,
// <dir>/<split>-images-idx3-ubyte[.gz] ([N, H, W] u8) and <dir>/<split>-labels-idx1-ubyte[.gz]
// ([N] u8) — the layout of MNIST and Fashion-MNIST (Xiao et al., 2017). Samples are
// [1, H, W] u8; get() returns pointers into the loaded images (no copy).
// Thread-safety: immutable after construction; get() may be called concurrently.
#pragma once

#include <string>

#include "tandem/data/dataset.h"
#include "tandem/tensor.h"

namespace tandem::data {

/// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// Fashion-MNIST's class names by label (Xiao et al., 2017, Table 1; torchvision's FashionMNIST.classes).
inline constexpr const char* kFashionMnistClasses[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

class MnistLike final : public Dataset {
 public:
  /// Loads split `split` ("train" or "t10k") from `dir`; for each file the .gz name is tried
  /// first, then the raw name (contents are detected by bytes, see read_idx()).
  /// Throws Error(io) when `dir` does not exist (the message says: install Debian's
  /// dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass --data DIR) or a file
  /// is missing or unreadable; Error(format) from read_idx(), when images are not rank 3 or
  /// labels not rank 1, when the counts differ (naming both files and counts), or when a label
  /// is >= num_classes (naming the labels file and the first bad index).
  MnistLike(const std::string& dir, const std::string& split, int64_t num_classes = 10);

  int64_t size() const override { return labels_.numel(); }
  ImageDims dims() const override { return dims_; }
  int64_t num_classes() const override { return num_classes_; }
  Sample get(int64_t index, std::vector<uint8_t>& scratch) const override;
  /// Prefetches the sample's pixels into cache (ignored for indices out of range).
  void prefetch(int64_t index) const noexcept override;
  int64_t label(int64_t index) const override;
  /// With 10 classes, Fashion-MNIST's names (kFashionMnistClasses); otherwise the number.
  std::string class_name(int64_t label) const override;

  /// All images [N, H, W] u8 and labels [N] u8, as read.
  const Tensor& images() const { return images_; }
  const Tensor& labels() const { return labels_; }

 private:
  Tensor images_, labels_;
  const uint8_t* pixels_ = nullptr;
  const uint8_t* label_bytes_ = nullptr;
  ImageDims dims_;
  int64_t num_classes_;
};

/// Fashion-MNIST is MNIST-like with 10 classes.
using FashionMnist = MnistLike;

}  // namespace tandem::data
