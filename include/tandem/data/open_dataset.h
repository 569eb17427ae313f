// open_dataset: the one place a dataset folder (`--data DIR`) is turned into a Dataset. It
// knows four on-disk formats, told apart by content when the format is `detect` (auto):
//   packed         DIR/manifest.json whose "format" is "tandem-packed" (packed.h)
//   fashion-mnist  MNIST-like IDX files <split>-images-idx3-ubyte[.gz] (mnist_like.h)
//   cifar10        data_batch_1.bin .. data_batch_5.bin, test_batch.bin (cifar.h)
//   cifar100       train.bin, test.bin (cifar.h)
//   folder         class folders of .jpg/.jpeg/.png files, or DIR/train and DIR/val holding
//                  them (image_folder.h)
// The CIFAR files may also sit in the archives' own subfolder (DIR/cifar-10-batches-bin,
// DIR/cifar-100-binary). A new format is recognised here, so the trainer and the eval command
// pick it up without change.
// Thread-safety: reentrant; the returned dataset is as Dataset.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tandem/data/dataset.h"

namespace tandem::data {

/// Which part of a dataset: the training samples or the held-out test samples (an image
/// folder's val/ subfolder or val_split share).
enum class Split { train, test };

/// "train" or "test".
const char* split_name(Split split);

/// The on-disk formats; `detect` ("auto") looks at the folder's contents.
enum class DatasetFormat { detect, fashion_mnist, cifar10, cifar100, folder, packed };

/// CIFAR-100's two labels: the 100 fine classes or the 20 coarse superclasses.
enum class CifarLabel { fine, coarse };

struct DatasetOptions {
  DatasetFormat format = DatasetFormat::detect;
  CifarLabel label = CifarLabel::fine;  // cifar100 only
  /// folder only: the fraction in (0, 1) of each class held out as the test split of a flat
  /// class-folder set; 0 = none (then the folder must have train/ and val/). See image_folder.h.
  double val_split = 0;
  uint64_t seed = 0;       // folder with val_split: which files are held out
  bool verify_crc = true;  // packed only: check each record's CRC32 at get()
};

/// "auto", "fashion-mnist", "cifar10", "cifar100", "folder", "packed".
const char* format_name(DatasetFormat format);
/// The inverse of format_name(). Throws Error(invalid_argument) listing the names.
DatasetFormat parse_dataset_format(const std::string& name);
/// "fine" or "coarse"; parse_cifar_label() throws Error(invalid_argument) for anything else.
const char* cifar_label_name(CifarLabel label);
CifarLabel parse_cifar_label(const std::string& name);

/// The format of the dataset in `dir`, judged by content in the order listed at the top of
/// this file (never `detect`). Throws Error(io) when `dir` does not exist or is not a folder
/// (with a hint to install the data), Error(format) naming `dir` and listing every layout
/// looked for when none matches.
DatasetFormat detect_format(const std::string& dir);

/// Opens split `split` of the dataset in folder `dir` as `options` say (format detect: see
/// detect_format()). Throws as detect_format() and the format's reader do: Error(io) for a
/// missing folder or file (with a hint to install the data), Error(format) for a malformed
/// file, naming it, Error(invalid_argument) for options that do not fit the format (a
/// val_split outside [0, 1), a val_split with a train/val folder, a val_split or a coarse
/// label given for a format without them).
std::shared_ptr<const Dataset> open_dataset(const std::string& dir, Split split, const DatasetOptions& options);

/// open_dataset(dir, split, DatasetOptions{}): the format detected, default options.
std::shared_ptr<const Dataset> open_dataset(const std::string& dir, Split split);

}  // namespace tandem::data
