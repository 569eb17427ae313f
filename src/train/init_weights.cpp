// --init FILE: a model's starting weights from a safetensors file, checked against the model
// before anything is read, then read tensor by tensor (load_init_weights) or element range by
// element range into the homes of a model built without memory (init_file_source).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/safetensors.h"
#include "train/weights.h"

namespace tandem::train {

namespace {

// The open file and the entry each model tensor takes from it (by state name).
struct InitFile {
  std::string path;
  int fd = -1;
  std::map<std::string, SafetensorsEntry> take;
  InitFile() = default;
  InitFile(const InitFile&) = delete;
  InitFile& operator=(const InitFile&) = delete;
  ~InitFile() {
    if (fd >= 0) ::close(fd);
  }
  // Bytes [offset, offset + n) of the file into dst.
  void read(uint64_t offset, uint64_t n, void* dst, const std::string& name) const {
    auto* out = static_cast<char*>(dst);
    while (n > 0) {
      const ssize_t got = ::pread(fd, out, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      TD_CHECK(got > 0, ErrorCode::io, "train", "--init {}: cannot read tensor '{}': {}", path, name,
               got < 0 ? std::strerror(errno) : "the file ended early");
      out += got, offset += static_cast<uint64_t>(got), n -= static_cast<uint64_t>(got);
    }
  }
};

// Every check of --init against the model's state (names, shapes, dtypes; shapes only, so a
// model without memory is checked too) and the tied aliases' bytes.
std::shared_ptr<InitFile> open_init(nn::Module& model, const std::string& path, const std::vector<std::string>& exclude) {
  auto f = std::make_shared<InitFile>();
  f->path = path;
  const std::vector<SafetensorsEntry> entries = read_safetensors_header(path);
  f->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TD_CHECK(f->fd >= 0, ErrorCode::io, "train", "--init {}: cannot open: {}", path, std::strerror(errno));
  const auto excluded = [&](const std::string& name) {
    return std::any_of(exclude.begin(), exclude.end(),
                       [&](const std::string& p) { return name.compare(0, p.size(), p) == 0; });
  };
  std::map<std::string, const SafetensorsEntry*> in_file;
  for (const SafetensorsEntry& e : entries) in_file[e.name] = &e;
  // Tied state (GPT-2's lm_head.weight): optional in the file, and then the source's copy.
  for (const auto& [alias, source] : model.tied_state()) {
    const auto a = in_file.find(alias), s = in_file.find(source);
    if (a == in_file.end() || s == in_file.end() || excluded(alias)) continue;
    const SafetensorsEntry &ta = *a->second, &ts = *s->second;
    bool same = ta.shape == ts.shape && ta.dtype == ts.dtype;
    if (same) {
      std::vector<char> x(ta.nbytes), y(ts.nbytes);
      f->read(ta.offset, ta.nbytes, x.data(), alias);
      f->read(ts.offset, ts.nbytes, y.data(), source);
      same = x == y;
    }
    TD_CHECK(same, ErrorCode::format, "train",
             "--init {}: tensor '{}' {} {} differs from '{}' {} {}: expected a copy (the model ties them)", path, alias,
             shape_str(ta.shape), dtype_name(ta.dtype), source, shape_str(ts.shape), dtype_name(ts.dtype));
    in_file.erase(a);
  }
  const std::string hint = exclude.empty() ? " (--init-exclude PREFIX skips tensors, e.g. fc.)" : "";
  for (const nn::NamedTensor& t : model.state_dict()) {
    if (excluded(t.name)) continue;
    const auto it = in_file.find(t.name);
    TD_CHECK(it != in_file.end(), ErrorCode::format, "train", "--init {}: tensor '{}' {} is not in the file{}", path,
             t.name, shape_str(t.tensor.shape()), hint);
    const SafetensorsEntry& src = *it->second;
    TD_CHECK(src.shape == t.tensor.shape(), ErrorCode::format, "train",
             "--init {}: tensor '{}' has shape {} in the file, expected {}{}", path, t.name, shape_str(src.shape),
             shape_str(t.tensor.shape()), hint);
    TD_CHECK(src.dtype == t.tensor.dtype(), ErrorCode::format, "train",
             "--init {}: tensor '{}' is {} in the file, expected {}", path, t.name, dtype_name(src.dtype),
             dtype_name(t.tensor.dtype()));
    f->take[t.name] = src;
    in_file.erase(it);
  }
  for (const auto& [name, e] : in_file)
    TD_CHECK(excluded(name), ErrorCode::format, "train",
             "--init {}: tensor '{}' {} is not in the model's state (another model's weights?){}", path, name,
             shape_str(e->shape), hint);
  return f;
}

}  // namespace

void load_init_weights(nn::Module& model, const std::string& path, const std::vector<std::string>& exclude) {
  const std::shared_ptr<InitFile> f = open_init(model, path, exclude);
  for (const nn::NamedTensor& t : model.state_dict()) {
    const auto it = f->take.find(t.name);
    if (it == f->take.end()) continue;  // excluded
    Tensor bytes = Tensor::empty(it->second.shape, it->second.dtype);
    f->read(it->second.offset, it->second.nbytes, bytes.raw_data(), t.name);
    Tensor dst = t.tensor;
    dst.copy_from(bytes);
  }
}

nn::ValueSource init_file_source(nn::Module& model, const std::string& path, const std::vector<std::string>& exclude,
                                 nn::ValueSource fallback) {
  std::shared_ptr<const InitFile> f = open_init(model, path, exclude);
  return [f, fallback](const nn::Parameter& p, int64_t begin, int64_t n, float* dst) {
    const auto it = f->take.find(p.name);
    if (it == f->take.end()) return fallback(p, begin, n, dst);  // --init-exclude: the seed's init
    TD_CHECK_ARG(begin >= 0 && n >= 0 && static_cast<uint64_t>(begin + n) * sizeof(float) <= it->second.nbytes,
                 "train", "--init {}: elements [{}, {}) of tensor '{}' of {} bytes", f->path, begin, begin + n, p.name,
                 it->second.nbytes);
    f->read(it->second.offset + static_cast<uint64_t>(begin) * sizeof(float), static_cast<uint64_t>(n) * sizeof(float),
            dst, p.name);
  };
}

}  // namespace tandem::train
