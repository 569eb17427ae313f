// CIFAR-10 and CIFAR-100 in their binary versions (Krizhevsky, 2009;
// https://www.cs.toronto.edu/~kriz/cifar.html, "Binary version"). Every record is its label
// bytes followed by 3072 pixel bytes, the 1024 red, then green, then blue values of a 32x32
// image in row-major order, i.e. [3, 32, 32] u8:
//   CIFAR-10  (3073 bytes): label (0..9); files data_batch_1.bin .. data_batch_5.bin (train)
//             and test_batch.bin (test); class names in batches.meta.txt, one a line.
//   CIFAR-100 (3074 bytes): coarse label (0..19), fine label (0..99); files train.bin and
//             test.bin; names in coarse_label_names.txt and fine_label_names.txt.
// A file's size must be a positive multiple of the record size and every label in range.
// Without the names file (or with one of the wrong number of lines) classes are named by
// number. All files are read into memory at construction; samples are raw [3, 32, 32] u8 and
// get() returns pointers into that memory (no copy).
// Thread-safety: immutable after construction; get() may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/data/dataset.h"
#include "tandem/data/open_dataset.h"

namespace tandem::data {

inline constexpr int64_t kCifarPixels = 3 * 32 * 32;  // bytes of one image, [3, 32, 32]

/// The records of one or more CIFAR binary files. Use Cifar10 or Cifar100.
class CifarBinary : public Dataset {
 public:
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  ImageDims dims() const override { return {3, 32, 32}; }
  int64_t num_classes() const override { return num_classes_; }
  /// Throws Error(invalid_argument) for an index out of range.
  Sample get(int64_t index, std::vector<uint8_t>& scratch) const override;
  void prefetch(int64_t index) const noexcept override;
  int64_t label(int64_t index) const override;
  /// The name from the meta file, else the number.
  std::string class_name(int64_t label) const override;
  /// The files read, in order (records are numbered through them).
  const std::vector<std::string>& files() const { return files_; }

 protected:
  /// Reads `files` (in `dir`) of records of label_limits.size() label bytes + 3072 pixel
  /// bytes; label byte k must be < label_limits[k], and byte `label_at` is the sample's label
  /// (num_classes = label_limits[label_at]); names from `names_file` (in `dir`) when present.
  /// Throws Error(io) for a missing or unreadable file (naming it), Error(format) for a size
  /// that is not a positive multiple of the record size ("<file>: expected a multiple of the
  /// 3073-byte record (1 label byte + 3072 pixel bytes), found 3072 bytes") or a label out of
  /// range (naming the file, the record and the label).
  CifarBinary(const std::string& dir, const std::vector<std::string>& files, const std::vector<int>& label_limits,
              int label_at, const std::string& names_file);

 private:
  std::vector<std::string> files_;
  std::vector<uint8_t> pixels_;  // [N, 3, 32, 32]
  std::vector<uint8_t> labels_;  // [N]
  std::vector<std::string> names_;
  int64_t num_classes_;
};

/// CIFAR-10: 10 classes, split train = data_batch_1..5.bin (50000 records in the original),
/// test = test_batch.bin (10000).
class Cifar10 final : public CifarBinary {
 public:
  Cifar10(const std::string& dir, Split split);
};

/// CIFAR-100: split train = train.bin (50000), test = test.bin (10000); labels fine (100
/// classes) or coarse (20). Both label bytes of every record are checked.
class Cifar100 final : public CifarBinary {
 public:
  Cifar100(const std::string& dir, Split split, CifarLabel label = CifarLabel::fine);
};

}  // namespace tandem::data
