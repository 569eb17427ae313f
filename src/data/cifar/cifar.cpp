#include "tandem/data/cifar.h"

#include "data/io/file_read.h"
#include "tandem/error.h"

namespace tandem::data {

namespace {
constexpr const char* kOp = "cifar";
}  // namespace

CifarBinary::CifarBinary(const std::string& dir, const std::vector<std::string>& files,
                         const std::vector<int>& label_limits, int label_at, const std::string& names_file)
    : num_classes_(label_limits.at(static_cast<size_t>(label_at))) {
  TD_CHECK(io::is_directory(dir), ErrorCode::io, kOp, "{}: expected a folder of CIFAR binary files, found {}", dir,
           io::exists(dir) ? "a file" : "nothing");
  const size_t nlabel = label_limits.size();
  const uint64_t record = nlabel + static_cast<uint64_t>(kCifarPixels);
  // Sizes first, so that a wrong file is refused before anything is read.
  uint64_t total = 0;
  for (const std::string& name : files) {
    const std::string path = dir + "/" + name;
    const uint64_t bytes = io::regular_file_size(path, kOp);
    TD_CHECK(bytes > 0 && bytes % record == 0, ErrorCode::format, kOp,
             "{}: expected a multiple of the {}-byte record ({} label byte{} + {} pixel bytes), found {} bytes", path,
             record, nlabel, nlabel == 1 ? "" : "s", kCifarPixels, bytes);
    total += bytes / record;
    files_.push_back(path);
  }
  pixels_.resize(total * static_cast<uint64_t>(kCifarPixels));
  labels_.resize(total);
  std::vector<uint8_t> buf;
  size_t n = 0;
  for (const std::string& path : files_) {
    const size_t bytes = io::read_file_into(path, kOp, buf);
    TD_CHECK(bytes % record == 0, ErrorCode::format, kOp, "{}: changed size while being read ({} bytes)", path,
             bytes);
    for (size_t r = 0; r < bytes / record; ++r, ++n) {
      const uint8_t* rec = buf.data() + r * record;
      for (size_t k = 0; k < nlabel; ++k)
        TD_CHECK(rec[k] < label_limits[k], ErrorCode::format, kOp,
                 "{}: record {} (byte offset {}): expected {} in [0, {}), found {}", path, r, r * record,
                 nlabel == 1 ? "the label" : (k == 0 ? "the coarse label" : "the fine label"), label_limits[k],
                 rec[k]);
      labels_[n] = rec[label_at];
      std::copy(rec + nlabel, rec + record, pixels_.begin() + static_cast<ptrdiff_t>(n * kCifarPixels));
    }
  }
  TD_CHECK(n == total, ErrorCode::format, kOp, "{}: files changed while being read", dir);
  const std::string names_path = dir + "/" + names_file;
  if (io::exists(names_path)) {
    std::vector<std::string> names = io::read_lines(names_path, kOp);
    if (static_cast<int64_t>(names.size()) == num_classes_) names_ = std::move(names);
  }
}

Sample CifarBinary::get(int64_t index, std::vector<uint8_t>&) const {
  TD_CHECK_ARG(index >= 0 && index < size(), kOp, "expected a sample index in [0, {}), found {}", size(), index);
  return {pixels_.data() + index * kCifarPixels, labels_[static_cast<size_t>(index)]};
}

void CifarBinary::prefetch(int64_t index) const noexcept {
  if (index < 0 || index >= size()) return;
  const uint8_t* p = pixels_.data() + index * kCifarPixels;
  for (int64_t k = 0; k < kCifarPixels; k += 64) __builtin_prefetch(p + k);
}

int64_t CifarBinary::label(int64_t index) const {
  TD_CHECK_ARG(index >= 0 && index < size(), kOp, "expected a sample index in [0, {}), found {}", size(), index);
  return labels_[static_cast<size_t>(index)];
}

std::string CifarBinary::class_name(int64_t label) const {
  if (names_.empty() || label < 0 || label >= num_classes_) return Dataset::class_name(label);
  return names_[static_cast<size_t>(label)];
}

static std::vector<std::string> cifar10_files(Split split) {
  if (split == Split::test) return {"test_batch.bin"};
  return {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"};
}

Cifar10::Cifar10(const std::string& dir, Split split)
    : CifarBinary(dir, cifar10_files(split), {10}, 0, "batches.meta.txt") {}

Cifar100::Cifar100(const std::string& dir, Split split, CifarLabel label)
    : CifarBinary(dir, {split == Split::train ? "train.bin" : "test.bin"}, {20, 100},
                  label == CifarLabel::fine ? 1 : 0,
                  label == CifarLabel::fine ? "fine_label_names.txt" : "coarse_label_names.txt") {}

}  // namespace tandem::data
