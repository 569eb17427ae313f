#include "tandem/data/mnist_like.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "tandem/data/idx.h"
#include "tandem/error.h"

namespace tandem::data {

namespace {
constexpr const char* kOp = "dataset";
constexpr const char* kInstallHint =
    "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass --data DIR";

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// <dir>/<stem>.gz when present, else <dir>/<stem>; Error(io) when neither exists.
std::string find_file(const std::string& dir, const std::string& stem) {
  const std::string gz = dir + "/" + stem + ".gz", raw = dir + "/" + stem;
  if (exists(gz)) return gz;
  if (exists(raw)) return raw;
  throw_error(ErrorCode::io, kOp,
              fmt::format("{}: missing: expected {} or {}; {}", dir, stem + ".gz", stem, kInstallHint));
}
}  // namespace

MnistLike::MnistLike(const std::string& dir, const std::string& split, int64_t num_classes)
    : num_classes_(num_classes) {
  TD_CHECK_ARG(num_classes >= 1 && num_classes <= 256, kOp, "expected num_classes in [1, 256], found {}",
               num_classes);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw_error(ErrorCode::io, kOp, fmt::format("{}: cannot open data directory: {}; {}", dir, std::strerror(errno),
                                                kInstallHint));
  TD_CHECK(S_ISDIR(st.st_mode), ErrorCode::io, kOp, "{}: expected a directory, found a file; {}", dir,
           kInstallHint);

  const std::string ipath = find_file(dir, split + "-images-idx3-ubyte");
  const std::string lpath = find_file(dir, split + "-labels-idx1-ubyte");
  images_ = read_idx(ipath, 3);  // [N, H, W]
  labels_ = read_idx(lpath, 1);  // [N]
  TD_CHECK(images_.size(0) == labels_.size(0), ErrorCode::format, kOp,
           "count mismatch: {} holds {} images but {} holds {} labels", ipath, images_.size(0), lpath,
           labels_.size(0));
  TD_CHECK(images_.size(0) > 0 && images_.size(1) > 0 && images_.size(2) > 0, ErrorCode::format, kOp,
           "{}: expected at least one image of at least 1x1 pixels, found shape {}", ipath,
           shape_str(images_.shape()));
  dims_ = {1, images_.size(1), images_.size(2)};
  pixels_ = images_.numel() ? images_.data<uint8_t>() : nullptr;
  label_bytes_ = labels_.numel() ? labels_.data<uint8_t>() : nullptr;
  for (int64_t i = 0; i < labels_.numel(); ++i)
    TD_CHECK(label_bytes_[i] < num_classes, ErrorCode::format, kOp,
             "{}: expected labels in [0, {}), found {} at index {}", lpath, num_classes, label_bytes_[i], i);
}

Sample MnistLike::get(int64_t index, std::vector<uint8_t>&) const {
  TD_CHECK_ARG(index >= 0 && index < size(), kOp, "expected a sample index in [0, {}), found {}", size(), index);
  return {pixels_ + index * dims_.numel(), label_bytes_[index]};
}

int64_t MnistLike::label(int64_t index) const {
  TD_CHECK_ARG(index >= 0 && index < size(), kOp, "expected a sample index in [0, {}), found {}", size(), index);
  return label_bytes_[index];
}

std::string MnistLike::class_name(int64_t label) const {
  if (num_classes_ != 10 || label < 0 || label >= num_classes_) return Dataset::class_name(label);
  return kFashionMnistClasses[label];
}

void MnistLike::prefetch(int64_t index) const noexcept {
  if (index < 0 || index >= size()) return;
  const uint8_t* p = pixels_ + index * dims_.numel();
  for (int64_t k = 0; k < dims_.numel(); k += 64) __builtin_prefetch(p + k);
  __builtin_prefetch(p + dims_.numel() - 1);
}

}  // namespace tandem::data
