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
#include <zlib.h>

#include "tandem/error.h"
#include "tandem/rng.h"
#include "tandem/safetensors.h"
#include "train/weights.h"

namespace tandem::train {

namespace {

// The open file and the entry each model tensor takes from it (by state name).
struct InitFile {
  std::string path;
  int fd = -1;
  std::map<std::string, SafetensorsEntry> take;
  uint64_t fingerprint = 0;  // of the file's size, header and sampled data
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

// The file's size, header and 64 blocks of 4 KiB spread over its data (CRC-32 each, mixed):
// what the ranks compare before each writes its shards from its own copy of the file.
uint64_t fingerprint(const InitFile& f, const std::vector<SafetensorsEntry>& entries) {
  uint64_t begin = 0, end = 0;  // the data section
  for (const SafetensorsEntry& e : entries) {
    begin = begin == 0 ? e.offset : std::min(begin, e.offset);
    end = std::max(end, e.offset + e.nbytes);
  }
  uint64_t h = mix64(end) ^ mix64(begin + 1);
  std::vector<unsigned char> block(4096);
  const uint64_t header = std::min<uint64_t>(begin, 1 << 20);
  std::vector<unsigned char> head(header);
  f.read(0, header, head.data(), "(header)");
  h = mix64(h ^ crc32(0L, head.data(), static_cast<uInt>(head.size())));
  if (end <= begin) return h;
  const uint64_t span = end - begin, n = std::min<uint64_t>(span, block.size());
  for (uint64_t k = 0; k < 64; ++k) {
    const uint64_t at = begin + (span - n) * k / 63;
    f.read(at, n, block.data(), "(data)");
    h = mix64(h ^ crc32(static_cast<uLong>(k), block.data(), static_cast<uInt>(n)));
  }
  return h;
}

// Every check of --init against the model's state (names, shapes, dtypes; shapes only, so a
// model without memory is checked too) and the tied aliases' bytes.
std::shared_ptr<InitFile> open_init(nn::Module& model, const std::string& path, const std::vector<std::string>& exclude) {
  auto f = std::make_shared<InitFile>();
  f->path = path;
  // One open: the header and every byte read later come from the same file, even if the path
  // is replaced meanwhile (O_NONBLOCK: a FIFO is refused as not a regular file, not waited on).
  f->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  TD_CHECK(f->fd >= 0, ErrorCode::io, "train", "--init {}: cannot open: {}", path, std::strerror(errno));
  const std::vector<SafetensorsEntry> entries = read_safetensors_header(f->fd, path);
  std::vector<bool> used(exclude.size(), false);  // each prefix must name some tensor
  const auto excluded = [&](const std::string& name) {
    bool any = false;
    for (size_t k = 0; k < exclude.size(); ++k)
      if (name.compare(0, exclude[k].size(), exclude[k]) == 0) used[k] = any = true;
    return any;
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
  for (size_t k = 0; k < exclude.size(); ++k)
    TD_CHECK_ARG(used[k], "train",
                 "--init-exclude {}: no tensor of the model or of --init {} starts with it; expected a prefix of "
                 "state-dict names such as '{}'",
                 exclude[k], path, entries.empty() ? std::string("fc.") : entries.front().name);
  f->fingerprint = fingerprint(*f, entries);
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
                                 nn::ValueSource fallback, uint64_t* fingerprint) {
  std::shared_ptr<const InitFile> f = open_init(model, path, exclude);
  if (fingerprint) *fingerprint = f->fingerprint;
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
