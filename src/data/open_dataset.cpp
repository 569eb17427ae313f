#include "tandem/data/open_dataset.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

#include "data/io/file_read.h"
#include "tandem/data/cifar.h"
#include "tandem/data/image_folder.h"
#include "tandem/data/mnist_like.h"
#include "tandem/data/packed.h"
#include "tandem/error.h"

namespace tandem::data {

namespace {
constexpr const char* kOp = "dataset";
constexpr const char* kInstallHint =
    "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass --data DIR";

struct FormatName {
  DatasetFormat format;
  const char* name;
};
constexpr FormatName kFormats[] = {{DatasetFormat::detect, "auto"},       {DatasetFormat::fashion_mnist, "fashion-mnist"},
                                   {DatasetFormat::cifar10, "cifar10"},    {DatasetFormat::cifar100, "cifar100"},
                                   {DatasetFormat::folder, "folder"},      {DatasetFormat::packed, "packed"}};

bool has_idx(const std::string& dir) {
  for (const char* split : {"train", "t10k"}) {
    const std::string stem = dir + "/" + split + "-images-idx3-ubyte";
    if (io::exists(stem) || io::exists(stem + ".gz")) return true;
  }
  return false;
}

// Whether `dir` holds `name` whose size is a positive multiple of `record` bytes.
bool has_records(const std::string& dir, const char* name, uint64_t record) {
  struct stat st {};
  const std::string p = dir + "/" + name;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
         static_cast<uint64_t>(st.st_size) % record == 0;
}

bool is_cifar10(const std::string& dir) {
  return has_records(dir, "data_batch_1.bin", 3073) || has_records(dir, "test_batch.bin", 3073);
}
bool is_cifar100(const std::string& dir) {
  return has_records(dir, "train.bin", 3074) || has_records(dir, "test.bin", 3074);
}

bool is_packed(const std::string& dir) {
  std::vector<uint8_t> text;
  const std::string p = dir + "/manifest.json";
  if (!io::exists(p)) return false;
  io::read_file_into(p, kOp, text);
  const std::string s(text.begin(), text.end());
  return s.find("\"tandem-packed\"") != std::string::npos;
}

// A class folder set: some subfolder holds a file with an image extension.
bool is_class_folder_set(const std::string& dir) {
  for (const io::DirEntry& e : io::list_directory(dir, kOp)) {
    if (!e.is_dir || e.name[0] == '.') continue;
    try {
      for (const io::DirEntry& f : io::list_directory(dir + "/" + e.name, kOp))
        if (!f.is_dir && has_image_extension(f.name)) return true;
    } catch (const Error&) {
      // an unreadable subfolder: ImageFolder reports it if this turns out to be one
    }
  }
  return false;
}

bool is_image_folder(const std::string& dir) {
  if (io::is_directory(dir + "/train") && is_class_folder_set(dir + "/train")) return true;
  return is_class_folder_set(dir);
}

// CIFAR archives unpack into a folder of their own; accept DIR or DIR/<that folder>.
std::string cifar_dir(const std::string& dir, const char* sub) {
  const std::string s = dir + "/" + sub;
  return io::is_directory(s) ? s : dir;
}
}  // namespace

const char* split_name(Split split) { return split == Split::train ? "train" : "test"; }

const char* format_name(DatasetFormat format) {
  for (const FormatName& f : kFormats)
    if (f.format == format) return f.name;
  return "?";
}

DatasetFormat parse_dataset_format(const std::string& name) {
  std::string names;
  for (const FormatName& f : kFormats) {
    if (name == f.name) return f.format;
    names += (names.empty() ? "" : ", ") + std::string(f.name);
  }
  throw_error(ErrorCode::invalid_argument, kOp, fmt::format("unknown dataset format '{}': expected one of {}", name, names));
}

const char* cifar_label_name(CifarLabel label) { return label == CifarLabel::fine ? "fine" : "coarse"; }

CifarLabel parse_cifar_label(const std::string& name) {
  if (name == "fine") return CifarLabel::fine;
  if (name == "coarse") return CifarLabel::coarse;
  throw_error(ErrorCode::invalid_argument, kOp, fmt::format("unknown CIFAR-100 label '{}': expected fine or coarse", name));
}

DatasetFormat detect_format(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw_error(ErrorCode::io, kOp,
                fmt::format("{}: cannot open data directory: {}; {}", dir, std::strerror(errno), kInstallHint));
  TD_CHECK(S_ISDIR(st.st_mode), ErrorCode::io, kOp, "{}: expected a directory, found a file; {}", dir, kInstallHint);
  if (is_packed(dir)) return DatasetFormat::packed;
  if (has_idx(dir)) return DatasetFormat::fashion_mnist;
  if (is_cifar10(cifar_dir(dir, "cifar-10-batches-bin"))) return DatasetFormat::cifar10;
  if (is_cifar100(cifar_dir(dir, "cifar-100-binary"))) return DatasetFormat::cifar100;
  if (is_image_folder(dir)) return DatasetFormat::folder;
  throw_error(ErrorCode::format, kOp,
              fmt::format("{}: no dataset found: looked for manifest.json of tandem-packed (packed), "
                          "train-images-idx3-ubyte[.gz] or t10k-images-idx3-ubyte[.gz] (fashion-mnist), "
                          "data_batch_1.bin or test_batch.bin of 3073-byte records (cifar10), train.bin or "
                          "test.bin of 3074-byte records (cifar100; also in cifar-10-batches-bin/ or "
                          "cifar-100-binary/), class folders of .jpg/.jpeg/.png files, directly or in train/ (folder); {}",
                          dir, kInstallHint));
}

std::shared_ptr<const Dataset> open_dataset(const std::string& dir, Split split, const DatasetOptions& options) {
  DatasetFormat format = options.format;
  if (format == DatasetFormat::detect) format = detect_format(dir);
  TD_CHECK_ARG(options.val_split == 0 || format == DatasetFormat::folder, kOp,
               "val_split {} applies to an image folder, but {} is {}", options.val_split, dir, format_name(format));
  // A packed copy of CIFAR-100 holds the labels it was packed with.
  TD_CHECK_ARG(options.label == CifarLabel::fine || format == DatasetFormat::cifar100, kOp,
               "label coarse applies to CIFAR-100 binary files, but {} is {}", dir, format_name(format));
  switch (format) {
    case DatasetFormat::fashion_mnist:
      return std::make_shared<MnistLike>(dir, split == Split::train ? "train" : "t10k");
    case DatasetFormat::cifar10: return std::make_shared<Cifar10>(cifar_dir(dir, "cifar-10-batches-bin"), split);
    case DatasetFormat::cifar100:
      return std::make_shared<Cifar100>(cifar_dir(dir, "cifar-100-binary"), split, options.label);
    case DatasetFormat::folder:
      return std::make_shared<ImageFolder>(dir, split, ImageFolderOptions{options.val_split, options.seed});
    case DatasetFormat::packed: return std::make_shared<PackedDataset>(dir, split, PackedOptions{options.verify_crc});
    case DatasetFormat::detect: break;
  }
  TD_ASSERT(false);
  return nullptr;
}

std::shared_ptr<const Dataset> open_dataset(const std::string& dir, Split split) {
  return open_dataset(dir, split, DatasetOptions{});
}

}  // namespace tandem::data
