// write_packed: streams each split's records into shards, then writes the manifest.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "data/io/file_read.h"
#include "data/packed/packed_layout.h"
#include "tandem/atomic_file.h"
#include "tandem/error.h"

namespace tandem::data {

namespace {
constexpr const char* kOp = "pack";
static_assert(static_cast<int>(Encoding::raw) == 0 && static_cast<int>(Encoding::jpeg) == 1 &&
              static_cast<int>(Encoding::png) == 2);

// One shard being written: header now, records as they come, index and footer at close().
class ShardWriter {
 public:
  ShardWriter(const std::string& path, const packed::Header& header) : file_(path, kOp) {
    const auto h = packed::encode_header(header);
    file_.write(h.data(), h.size());
  }
  void add(const uint8_t* bytes, size_t size, uint32_t label, Encoding enc) {
    TD_CHECK(size <= UINT32_MAX, ErrorCode::invalid_argument, kOp, "a record of {} bytes: expected < 4 GiB", size);
    entries_.push_back({offset_, static_cast<uint32_t>(size), packed::crc32_of(bytes, size), label,
                        packed::encoding_code(enc)});
    if (size) file_.write(bytes, size);
    offset_ += size;
  }
  uint64_t record_bytes() const { return offset_ - kPackedHeaderBytes; }
  int64_t records() const { return static_cast<int64_t>(entries_.size()); }
  // Index, footer, commit. Returns the shard's size in bytes; index_crc() is valid after it.
  uint64_t close() {
    std::vector<uint8_t> index(entries_.size() * kPackedIndexEntryBytes);
    for (size_t i = 0; i < entries_.size(); ++i) packed::encode_entry(entries_[i], index.data() + i * kPackedIndexEntryBytes);
    if (!index.empty()) file_.write(index.data(), index.size());
    index_crc_ = packed::crc32_of(index.data(), index.size());
    const auto footer = packed::encode_footer({entries_.size(), offset_, index_crc_});
    file_.write(footer.data(), footer.size());
    file_.commit();
    return offset_ + index.size() + footer.size();
  }
  uint32_t index_crc() const { return index_crc_; }

 private:
  AtomicFile file_;
  std::vector<packed::Entry> entries_;
  uint64_t offset_ = kPackedHeaderBytes;
  uint32_t index_crc_ = 0;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A file an earlier pack into the folder may have left: its manifest, shards, and the
// temporary files of a pack that was killed.
bool is_pack_file(const io::DirEntry& e) {
  return e.is_regular && (e.name == packed::kManifest || ends_with(e.name, ".tpk") ||
                          e.name.find(".tpk.tmp-") != std::string::npos ||
                          e.name.find(std::string(packed::kManifest) + ".tmp-") != std::string::npos);
}

// Creates `dir`, or checks that it holds nothing but an earlier pack's files (which are
// replaced), so that packing never mixes shards into an unrelated folder.
void make_folder(const std::string& dir) {
  if (io::is_directory(dir)) {
    for (const io::DirEntry& e : io::list_directory(dir, kOp))
      TD_CHECK(is_pack_file(e), ErrorCode::invalid_argument, kOp,
               "{}: expected a new or empty folder, or one holding an earlier pack, found {} (not a shard or "
               "manifest)",
               dir, dir + "/" + e.name);
    return;
  }
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw_error(ErrorCode::io, kOp, fmt::format("{}: cannot create folder: {}", dir, std::strerror(errno)));
}

// Removes the shards of an earlier pack that the new manifest does not name.
void remove_stale_shards(const std::string& dir, const std::vector<std::string>& written) {
  for (const io::DirEntry& e : io::list_directory(dir, kOp))
    if (e.is_regular && ends_with(e.name, ".tpk") &&
        std::find(written.begin(), written.end(), e.name) == written.end())
      ::unlink((dir + "/" + e.name).c_str());
}
}  // namespace

PackResult write_packed(const std::vector<PackSplit>& splits, const std::string& out_dir, const PackOptions& options) {
  TD_CHECK_ARG(options.shard_size_bytes > 0, kOp, "expected a shard size > 0 bytes, found 0");
  TD_CHECK_ARG(!splits.empty() && splits[0].data, kOp, "expected at least one split to pack");
  const Dataset& first = *splits[0].data;
  const ImageDims dims = first.dims();
  for (const PackSplit& s : splits) {
    TD_CHECK_ARG(s.data, kOp, "split {}: no dataset", s.name);
    TD_CHECK_ARG(s.data->dims() == dims && s.data->num_classes() == first.num_classes(), kOp,
                 "split {} has dims [{}, {}, {}] and {} classes; split {} has [{}, {}, {}] and {}: expected the same",
                 s.name, s.data->dims().channels, s.data->dims().height, s.data->dims().width, s.data->num_classes(),
                 splits[0].name, dims.channels, dims.height, dims.width, first.num_classes());
  }
  make_folder(out_dir);
  // A folder is complete when it has a manifest: drop an old one before its shards are replaced.
  const std::string manifest_path = out_dir + "/" + packed::kManifest;
  if (::unlink(manifest_path.c_str()) != 0 && errno != ENOENT)
    throw_error(ErrorCode::io, kOp, fmt::format("{}: cannot remove: {}", manifest_path, std::strerror(errno)));
  const packed::Header header{kPackedVersion, static_cast<uint32_t>(dims.channels), static_cast<uint32_t>(dims.height),
                              static_cast<uint32_t>(dims.width), static_cast<uint32_t>(first.num_classes())};
  const bool raw = dims.height > 0 && dims.width > 0;

  nlohmann::json manifest = {{"format", packed::kFormatName},
                             {"version", kPackedVersion},
                             {"dims", {dims.channels, dims.height, dims.width}}};
  nlohmann::json classes = nlohmann::json::array();
  for (int64_t c = 0; c < first.num_classes(); ++c) classes.push_back(first.class_name(c));
  manifest["classes"] = classes;

  PackResult result;
  std::vector<uint8_t> scratch;
  std::vector<std::string> written;
  for (const PackSplit& s : splits) {
    nlohmann::json shards = nlohmann::json::array();
    std::unique_ptr<ShardWriter> shard;
    std::string shard_name;
    auto finish = [&] {
      const int64_t n = shard->records();
      const uint64_t bytes = shard->close();
      written.push_back(shard_name);
      shards.push_back({{"file", shard_name}, {"records", n}, {"bytes", bytes}, {"index_crc", shard->index_crc()}});
      result.bytes += bytes;
      ++result.shards;
      shard.reset();
    };
    const int64_t n = s.data->size();
    for (int64_t i = 0; i < n; ++i) {
      const Sample smp = s.data->get(i, scratch);
      const size_t size = raw ? static_cast<size_t>(dims.numel()) : smp.size;
      TD_CHECK(raw == (smp.encoding == Encoding::raw), ErrorCode::invalid_argument, kOp,
               "split {} sample {}: a {} sample in a dataset of dims [{}, {}, {}]", s.name, i,
               smp.encoding == Encoding::raw ? "raw" : "encoded", dims.channels, dims.height, dims.width);
      if (shard && shard->records() > 0 && shard->record_bytes() + size > options.shard_size_bytes) finish();
      if (!shard) {
        shard_name = fmt::format("{}-{:05d}.tpk", s.name, shards.size());
        shard = std::make_unique<ShardWriter>(out_dir + "/" + shard_name, header);
      }
      shard->add(smp.pixels, size, static_cast<uint32_t>(smp.label), smp.encoding);
    }
    if (shard) finish();
    manifest["splits"][s.name] = {{"records", n}, {"shards", shards}};
    result.records += n;
  }
  const std::string text = manifest.dump(1) + "\n";
  AtomicFile m(manifest_path, kOp);
  m.write(text.data(), text.size());
  m.commit();
  remove_stale_shards(out_dir, written);
  return result;
}

}  // namespace tandem::data
