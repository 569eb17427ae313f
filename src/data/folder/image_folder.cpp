#include "tandem/data/image_folder.h"


#include <cmath>
#include <cstring>

#include "data/io/file_read.h"
#include "tandem/data/image_codec.h"
#include "tandem/data/sampler.h"
#include "tandem/error.h"

namespace tandem::data {

namespace {
constexpr const char* kOp = "image folder";

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool ends_with_nocase(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  if (s.size() <= n) return false;  // a bare ".jpg" is a hidden name, not an image
  for (size_t i = 0; i < n; ++i)
    if (lower(s[s.size() - n + i]) != suffix[i]) return false;
  return true;
}

struct ClassFiles {
  std::string name;
  std::vector<std::string> files;  // full paths, byte order of the names
};

// The class folders of `root` with their files, checked as the header says.
std::vector<ClassFiles> scan(const std::string& root) {
  TD_CHECK(io::is_directory(root), ErrorCode::io, kOp, "{}: expected a folder of class folders, found {}", root,
           io::exists(root) ? "a file" : "nothing (no such folder)");
  std::vector<ClassFiles> classes;
  for (const io::DirEntry& e : io::list_directory(root, kOp)) {
    if (!e.is_dir || e.name[0] == '.') continue;
    ClassFiles c{e.name, {}};
    const std::string dir = root + "/" + e.name;
    for (const io::DirEntry& f : io::list_directory(dir, kOp)) {
      if (f.name[0] == '.') continue;
      const std::string path = dir + "/" + f.name;
      TD_CHECK(!f.is_dir, ErrorCode::format, kOp, "{}: expected image files in class folder {}, found a folder",
               path, dir);
      TD_CHECK(has_image_extension(f.name), ErrorCode::format, kOp,
               "{}: expected an image file (.jpg, .jpeg or .png) in class folder {}", path, dir);
      TD_CHECK(f.is_regular, ErrorCode::io, kOp, "{}: expected a regular file, found {}", path,
               io::describe_non_regular(path));
      c.files.push_back(path);
    }
    TD_CHECK(!c.files.empty(), ErrorCode::format, kOp, "{}: empty class folder: expected .jpg, .jpeg or .png files",
             dir);
    classes.push_back(std::move(c));
  }
  TD_CHECK(!classes.empty(), ErrorCode::format, kOp,
           "{}: no class folders: expected {}/<class>/<image>.jpg|.jpeg|.png", root, root);
  return classes;
}

std::string names_of(const std::vector<ClassFiles>& classes) {
  std::string s;
  for (size_t i = 0; i < classes.size() && i < 8; ++i) s += (i ? ", " : "") + classes[i].name;
  if (classes.size() > 8) s += fmt::format(", ... ({} in all)", classes.size());
  return s;
}
}  // namespace

bool has_image_extension(const std::string& name) noexcept {
  return ends_with_nocase(name, ".jpg") || ends_with_nocase(name, ".jpeg") || ends_with_nocase(name, ".png");
}

ImageFolder::ImageFolder(const std::string& root) : root_(root) {
  for (ClassFiles& c : scan(root)) {
    for (std::string& p : c.files) {
      paths_.push_back(std::move(p));
      labels_.push_back(static_cast<int32_t>(classes_.size()));
    }
    classes_.push_back(std::move(c.name));
  }
}

ImageFolder::ImageFolder(const std::string& dir, Split split, const ImageFolderOptions& options) {
  const double f = options.val_split;
  TD_CHECK_ARG(f >= 0 && f < 1, kOp, "expected val_split in (0, 1) or 0 for none, found {}", f);
  const std::string train = dir + "/train";
  const std::string val = io::is_directory(dir + "/val") ? dir + "/val" : dir + "/test";
  if (io::is_directory(train) && io::is_directory(val)) {
    TD_CHECK_ARG(f == 0, kOp, "{}: val_split {} applies to a flat folder of classes, but {} has train/ and {}/", dir, f,
                 dir, val.substr(dir.size() + 1));
    const std::vector<ClassFiles> train_classes = scan(train);
    const std::vector<ClassFiles> classes = split == Split::train ? train_classes : scan(val);
    if (split == Split::test) {
      bool same = classes.size() == train_classes.size();
      for (size_t i = 0; same && i < classes.size(); ++i) same = classes[i].name == train_classes[i].name;
      TD_CHECK(same, ErrorCode::format, kOp, "{}: expected the class folders of {} ({}), found {}", val, train,
               names_of(train_classes), names_of(classes));
    }
    root_ = split == Split::train ? train : val;
    for (const ClassFiles& c : classes) {
      for (const std::string& p : c.files) {
        paths_.push_back(p);
        labels_.push_back(static_cast<int32_t>(classes_.size()));
      }
      classes_.push_back(c.name);
    }
    return;
  }
  // train/ alone, holding class folders (a class named "train" would hold only images): the
  // class-folder set is train/, split by val_split like a flat folder.
  bool train_only = false;
  if (io::is_directory(train))
    for (const io::DirEntry& e : io::list_directory(train, kOp)) train_only = train_only || (e.is_dir && e.name[0] != '.');
  TD_CHECK_ARG(f > 0 || split == Split::train, kOp, "{}: no test split: expected {}/train and {}/val, or a fraction to "
               "hold out{} (--val-split)", dir, dir, dir, train_only ? " of train/" : "");
  root_ = train_only ? train : dir;
  std::vector<int64_t> perm;
  std::vector<char> held;
  for (const ClassFiles& c : scan(root_)) {
    const int64_t n = static_cast<int64_t>(c.files.size());
    const int64_t k = std::llround(f * static_cast<double>(n));
    held.assign(static_cast<size_t>(n), 0);
    if (k > 0) {
      random_permutation(n, options.seed, classes_.size(), perm);
      for (int64_t i = 0; i < k; ++i) held[static_cast<size_t>(perm[static_cast<size_t>(i)])] = 1;
    }
    const char want = split == Split::test ? 1 : 0;
    for (int64_t i = 0; i < n; ++i) {
      if (held[static_cast<size_t>(i)] != want) continue;
      paths_.push_back(c.files[static_cast<size_t>(i)]);
      labels_.push_back(static_cast<int32_t>(classes_.size()));
    }
    classes_.push_back(c.name);
  }
}

Sample ImageFolder::get(int64_t index, std::vector<uint8_t>& scratch) const {
  TD_CHECK_ARG(index >= 0 && index < size(), kOp, "expected a sample index in [0, {}), found {}", size(), index);
  const std::string& p = paths_[static_cast<size_t>(index)];
  const size_t n = io::read_file_into(p, kOp, scratch);
  const Encoding enc = sniff_encoding(scratch.data(), n);
  TD_CHECK(enc != Encoding::raw, ErrorCode::format, kOp, "{}: expected JPEG or PNG bytes, found {}", p,
           n < 8 ? fmt::format("{} bytes", n) : "an unknown signature");
  return {scratch.data(), labels_[static_cast<size_t>(index)], enc, n, p.c_str()};
}

int64_t ImageFolder::label(int64_t index) const {
  TD_CHECK_ARG(index >= 0 && index < size(), kOp, "expected a sample index in [0, {}), found {}", size(), index);
  return labels_[static_cast<size_t>(index)];
}

std::string ImageFolder::class_name(int64_t label) const {
  if (label < 0 || label >= num_classes()) return Dataset::class_name(label);  // throws
  return classes_[static_cast<size_t>(label)];
}

}  // namespace tandem::data
