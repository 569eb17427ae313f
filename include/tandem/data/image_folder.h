// ImageFolder: a folder of class folders of image files, torchvision's
// torchvision.datasets.ImageFolder layout:
//   ROOT/<class>/<file>.jpg|.jpeg|.png     (extensions case-insensitive)
// Class names are the class folders' names sorted in byte order; label i is the i-th name.
// Within a class, files are sorted in byte order of their names. Samples are the files' encoded
// bytes (Encoding jpeg or png, judged by content at get(): a .png holding a JPEG is a JPEG).
//
// Splits: DIR/train and DIR/val (or DIR/test when there is no val) each a class-folder set;
// both must hold the same class names. Or DIR/train alone (holding class folders), or else
// DIR itself, is the class-folder set and `val_split` =
// f in (0, 1) holds out a fraction of each class as the test split (stratified): for class c
// with n_c files (sorted), k_c = round(f * n_c) files are held out, chosen as the first k_c
// positions of random_permutation(n_c, seed, c) (sampler.h: Philox(seed, c), a pure function
// of (seed, class index), independent of the other classes); both splits keep byte order.
//
// Strict about what it finds (torchvision skips unknown files silently): a class folder must
// hold only image files (entries whose names start with '.' are skipped, e.g. .DS_Store) and
// at least one; files directly in ROOT are ignored. Errors, all naming the path:
//   Error(io)     ROOT missing or not a folder; a class folder that cannot be listed (with
//                 strerror); a FIFO, device or broken link named like an image; at get(): a
//                 file that cannot be read (with strerror)
//   Error(format) no class folders; an empty class folder; a file without a .jpg/.jpeg/.png
//                 extension or a subfolder in a class folder; train/ and val/ class names that
//                 differ; at get(): a file whose bytes are neither JPEG nor PNG
//   Error(invalid_argument) val_split outside [0, 1), or given with a train/val layout, or
//                 the test split asked of a flat folder without val_split
// get() reads the whole file into the caller's scratch vector (one open, read, close) and
// returns an encoded Sample whose source is the file's full path (stored by the dataset, valid
// for its lifetime). dims() = {3, 0, 0}: images differ in size and decode to RGB.
// Thread-safety: immutable after construction; get() may be called concurrently with
// different scratch buffers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/data/dataset.h"
#include "tandem/data/open_dataset.h"

namespace tandem::data {

struct ImageFolderOptions {
  double val_split = 0;  // fraction held out per class of a flat folder; 0 = train/ and val/
  uint64_t seed = 0;     // which files are held out
};

/// Whether `name` ends in .jpg, .jpeg or .png, case-insensitively. Never throws.
bool has_image_extension(const std::string& name) noexcept;

class ImageFolder final : public Dataset {
 public:
  /// Opens split `split` of `dir` (layout and errors: see the top of this file).
  ImageFolder(const std::string& dir, Split split, const ImageFolderOptions& options = {});
  /// One class-folder set `root`, every file (no split).
  explicit ImageFolder(const std::string& root);

  int64_t size() const override { return static_cast<int64_t>(paths_.size()); }
  ImageDims dims() const override { return {3, 0, 0}; }
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  /// Reads file `index` into `scratch`; Sample{scratch.data(), label, jpeg|png, size, path}.
  /// Throws Error(invalid_argument) for an index out of range, Error(io) / Error(format) as
  /// above.
  Sample get(int64_t index, std::vector<uint8_t>& scratch) const override;
  int64_t label(int64_t index) const override;
  std::string class_name(int64_t label) const override;

  /// The class-folder set the samples come from (ROOT, ROOT/train, ROOT/val).
  const std::string& root() const { return root_; }
  const std::vector<std::string>& classes() const { return classes_; }
  /// Full path of sample `index` (unchecked: index in [0, size())).
  const std::string& path(int64_t index) const { return paths_[static_cast<size_t>(index)]; }

 private:
  std::string root_;
  std::vector<std::string> classes_;
  std::vector<std::string> paths_;  // sorted by (label, file name)
  std::vector<int32_t> labels_;
};

}  // namespace tandem::data
