#include "tandem/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "tandem/atomic_file.h"

namespace tandem {

using json = nlohmann::json;

static const char* kOp = "safetensors";

[[noreturn]] static void format_error(const std::string& path, const std::string& msg) {
  throw_error(ErrorCode::format, kOp, path + ": " + msg);
}

namespace {

// Bytes [offset, offset + n) of fd into dst; false at a read error or the end of the file.
bool pread_all(int fd, void* dst, uint64_t n, uint64_t offset) {
  auto* out = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd, out, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    out += got, offset += static_cast<uint64_t>(got), n -= static_cast<uint64_t>(got);
  }
  return true;
}

// A JSON parser's message cut to one short printable line (it may quote the bad bytes).
std::string short_message(const char* what) {
  std::string m(what);
  if (m.size() > 160) m = m.substr(0, 160) + "...";
  for (char& c : m)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return m;
}

struct OpenFile {
  int fd = -1;
  explicit OpenFile(const std::string& path) {
    // O_NONBLOCK: a FIFO must not block the open; it is refused below as not a regular file.
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw_error(ErrorCode::io, kOp, path + ": cannot open: " + std::strerror(errno));
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  ~OpenFile() { ::close(fd); }
};

}  // namespace

std::vector<SafetensorsEntry> read_safetensors_header(const std::string& path,
                                                     std::map<std::string, std::string>* metadata) {
  const OpenFile f(path);
  return read_safetensors_header(f.fd, path, metadata);
}

std::vector<SafetensorsEntry> read_safetensors_header(int fd, const std::string& path,
                                                     std::map<std::string, std::string>* metadata) {
  // A directory or a FIFO opens but has no size and no bytes: refuse anything that is not a
  // regular file before reading its length.
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_error(ErrorCode::io, kOp, path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) format_error(path, "expected a safetensors file, found a directory or special file");
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) format_error(path, fmt::format("file of {} bytes is too short for a header", file_size));
  unsigned char len_bytes[8];
  if (!pread_all(fd, len_bytes, 8, 0)) throw_error(ErrorCode::io, kOp, path + ": read error in the header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
  if (header_len > file_size - 8 || header_len > (uint64_t{100} << 20)) {
    format_error(path, fmt::format("not a safetensors file: its first 8 bytes give a header length of {}, more "
                                   "than the file's {} bytes",
                                   header_len, file_size));
  }
  std::string header(header_len, '\0');
  if (!pread_all(fd, header.data(), header_len, 8)) throw_error(ErrorCode::io, kOp, path + ": read error in header");
  json h;
  try {
    h = json::parse(header);
  } catch (const std::exception& e) {
    format_error(path, "header is not valid JSON: " + short_message(e.what()));
  }
  if (!h.is_object()) format_error(path, "header is not a JSON object");
  const uint64_t data_size = file_size - 8 - header_len;

  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (metadata && it.value().is_object())
        for (auto m = it.value().begin(); m != it.value().end(); ++m)
          (*metadata)[m.key()] = m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
      continue;
    }
    const json& e = it.value();
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      format_error(path, "entry '" + it.key() + "' lacks dtype, shape or data_offsets");
    Entry en;
    en.name = it.key();
    try {
      const std::string dtype_name_str = e["dtype"].get<std::string>();
      try {
        en.dtype = dtype_from_safetensors_name(dtype_name_str);
      } catch (const Error&) {
        format_error(path, fmt::format("entry '{}': unsupported dtype '{}' (expected F32, F16, BF16, I32, I64 or U8)",
                                       en.name, dtype_name_str));
      }
      if (!e["shape"].is_array()) format_error(path, "entry '" + en.name + "': shape must be an array of integers");
      // numel * element size must fit in int64: a shape whose product wraps around would
      // otherwise pass the data_offsets check with a tiny (even empty) byte range.
      int64_t bytes = static_cast<int64_t>(dtype_size(en.dtype));
      for (const auto& d : e["shape"]) {
        if (!d.is_number_integer()) format_error(path, "entry '" + en.name + "': shape must be an array of integers");
        if (d.is_number_unsigned() && d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
          format_error(path, fmt::format("entry '{}': dimension {} is past 2^63", en.name, d.get<uint64_t>()));
        const int64_t v = d.get<int64_t>();
        if (v < 0) format_error(path, "entry '" + en.name + "' has a negative dimension");
        if (__builtin_mul_overflow(bytes, v, &bytes))
          format_error(path, fmt::format("entry '{}': the shape's dimensions multiply past 2^63 bytes", en.name));
        en.shape.push_back(v);
      }
      const auto& off = e["data_offsets"];
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        format_error(path, "entry '" + en.name + "': data_offsets must be [begin, end], two integers >= 0");
      en.begin = off[0].get<uint64_t>();
      en.end = off[1].get<uint64_t>();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& ex) {
      format_error(path, "entry '" + en.name + "': " + ex.what());
    }
    const uint64_t expect = static_cast<uint64_t>(shape_numel(en.shape)) * dtype_size(en.dtype);
    if (en.end < en.begin)
      format_error(path, fmt::format("entry '{}': data_offsets [{}, {}] end before they begin: expected [begin, end] "
                                     "with begin <= end",
                                     en.name, en.begin, en.end));
    if (en.end - en.begin != expect)
      format_error(path, fmt::format("entry '{}': data_offsets [{}, {}] hold {} bytes, shape {} {} needs {}",
                                     en.name, en.begin, en.end, en.end - en.begin, shape_str(en.shape),
                                     dtype_name(en.dtype), expect));
    if (en.end > data_size)
      format_error(path, fmt::format("truncated: entry '{}' ends at byte {} of a {}-byte data section", en.name,
                                     en.end, data_size));
    entries.push_back(std::move(en));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);  // empty ones first
  });
  // Each byte belongs to one tensor at most: entries sharing bytes would let a small file
  // claim many times its size in tensors.
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].begin < entries[i - 1].end)
      format_error(path, fmt::format("entries '{}' and '{}' overlap: data_offsets [{}, {}] and [{}, {}]; expected "
                                     "disjoint byte ranges",
                                     entries[i - 1].name, entries[i].name, entries[i - 1].begin, entries[i - 1].end,
                                     entries[i].begin, entries[i].end));
  std::vector<SafetensorsEntry> out;
  out.reserve(entries.size());
  for (Entry& en : entries)
    out.push_back({std::move(en.name), en.dtype, std::move(en.shape), 8 + header_len + en.begin, en.end - en.begin});
  return out;
}

NamedTensors load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  const OpenFile f(path);  // one open: the header and the bytes come from the same file
  const std::vector<SafetensorsEntry> entries = read_safetensors_header(f.fd, path, metadata);
  NamedTensors out;
  out.reserve(entries.size());
  for (const SafetensorsEntry& en : entries) {
    Tensor t = Tensor::empty(en.shape, en.dtype);
    if (!pread_all(f.fd, t.raw_data(), en.nbytes, en.offset))
      throw_error(ErrorCode::io, kOp, path + ": read error in entry '" + en.name + "'");
    out.emplace_back(en.name, std::move(t));
  }
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  std::set<std::string> seen;
  uint64_t offset = 0;
  std::vector<Tensor> data;
  for (const auto& [name, t0] : tensors) {
    TD_CHECK_ARG(!name.empty() && name != "__metadata__", kOp, "invalid tensor name '{}'", name);
    TD_CHECK_ARG(seen.insert(name).second, kOp, "duplicate tensor name '{}'", name);
    TD_CHECK_ARG(t0.defined() && t0.device().is_host(), kOp, "tensor '{}' is not a host tensor", name);
    Tensor t = t0.is_contiguous() ? t0 : t0.clone();
    const uint64_t n = t.nbytes();
    h[name] = {{"dtype", dtype_safetensors_name(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    data.push_back(t);
  }
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::string header = h.dump();
  while ((header.size() + 8) % 8 != 0) header.push_back(' ');

  AtomicFile out(path, kOp);  // the old file stays until the new one is complete
  unsigned char len_bytes[8];
  uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(len >> (8 * i));
  out.write(len_bytes, 8);
  out.write(header.data(), header.size());
  for (const Tensor& t : data) out.write(t.raw_data(), t.nbytes());
  out.commit();
}

const Tensor& find_tensor(const NamedTensors& tensors, const std::string& name, const std::string& what) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw_error(ErrorCode::format, kOp, what + ": missing tensor '" + name + "'");
}

}  // namespace tandem
