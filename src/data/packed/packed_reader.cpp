// PackedDataset: the manifest, the shards mapped read-only, every header, index and footer
// checked at open; record CRCs at get().
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "data/io/file_read.h"
#include "data/packed/packed_layout.h"
#include "tandem/error.h"

namespace tandem::data {

namespace {
constexpr const char* kOp = "packed";

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw_error(ErrorCode::format, kOp, path + ": " + what);
}

size_t page_size() {
  static const size_t p = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

// Pages [p, p + n) rounded out to page boundaries.
void advise(const void* p, size_t n, int advice) noexcept {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(page_size() - 1);
  const uintptr_t e = reinterpret_cast<uintptr_t>(p) + n;
  if (e > a) ::madvise(reinterpret_cast<void*>(a), e - a, advice);
}
}  // namespace

// A manifest's numbers are JSON integers (nlohmann would otherwise truncate 28.9 to 28 and wrap
// 2^64 - 1 to -1); `what` names the field.
static int64_t integer_field(const nlohmann::json& j, const std::string& mpath, const std::string& what) {
  const bool fits = j.is_number_integer() && !(j.is_number_unsigned() && j.get<uint64_t>() > INT64_MAX);
  if (!fits) bad(mpath, fmt::format("{} {}: expected an integer in [0, 2^63)", what, j.dump().substr(0, 32)));
  return j.get<int64_t>();
}

// Shards mapped at once by one split: each is a mapping, and Linux allows a process 65,530 of
// them (vm.max_map_count) for everything it maps.
constexpr size_t kMaxShards = 16384;

PackedDataset::PackedDataset(const std::string& dir, Split split, const PackedOptions& options)
    : verify_crc_(options.verify_crc) {
  const std::string mpath = dir + "/" + packed::kManifest;
  std::vector<uint8_t> text;
  io::read_file_into(mpath, kOp, text);
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(text.begin(), text.end());
    if (m.value("format", std::string()) != packed::kFormatName)
      bad(mpath, fmt::format("expected \"format\": \"{}\"", packed::kFormatName));
    const int64_t version = integer_field(m.at("version"), mpath, "\"version\"");
    if (version != kPackedVersion)
      bad(mpath, fmt::format("unsupported version {}: this build reads version {}", version, kPackedVersion));
    const auto d = m.at("dims");
    dims_ = {integer_field(d.at(0), mpath, "\"dims\"[0]"), integer_field(d.at(1), mpath, "\"dims\"[1]"),
             integer_field(d.at(2), mpath, "\"dims\"[2]")};
    // Bounded before any product is taken (numel(), record sizes): channels 1-4, sides up to
    // JPEG's 65,535, both 0 for a folder of encoded images.
    const bool sides = (dims_.height == 0 && dims_.width == 0) ||
                       (dims_.height > 0 && dims_.height <= 65535 && dims_.width > 0 && dims_.width <= 65535);
    if (dims_.channels < 1 || dims_.channels > 4 || !sides)
      bad(mpath, fmt::format("\"dims\" [{}, {}, {}]: expected [C, H, W] with C in 1..4 and H, W in 1..65535 (or both 0 "
                             "for encoded images)",
                             dims_.channels, dims_.height, dims_.width));
    for (const auto& c : m.at("classes")) classes_.push_back(c.get<std::string>());
    if (classes_.empty()) bad(mpath, "expected at least one class name in \"classes\"");
    const char* sname = split_name(split);
    if (!m.at("splits").contains(sname))
      bad(mpath, fmt::format("no split \"{}\" (the folder was packed without it)", sname));
    const auto& s = m["splits"][sname];
    const int64_t records = integer_field(s.at("records"), mpath, fmt::format("split {}: \"records\"", sname));
    const auto& shards = s.at("shards");
    if (!shards.is_array() || shards.size() > kMaxShards)
      bad(mpath, fmt::format("split {}: {} shards: expected a list of at most {}", sname,
                             shards.is_array() ? shards.size() : 0, kMaxShards));
    std::set<std::string> names;  // every name checked before any shard is mapped
    for (const auto& sh : shards) {
      const std::string file = sh.at("file").get<std::string>();
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
        bad(mpath, fmt::format("bad shard name '{}'", file.substr(0, 64)));
      if (!names.insert(file).second) bad(mpath, fmt::format("split {}: shard '{}' listed twice", sname, file));
    }
    for (const auto& sh : shards) {
      const std::string file = sh.at("file").get<std::string>();
      const int64_t crc = sh.contains("index_crc") ? integer_field(sh["index_crc"], mpath, file + ": \"index_crc\"") : -1;
      if (crc > UINT32_MAX) bad(mpath, fmt::format("{}: \"index_crc\" {}: expected a CRC32", file, crc));
      map_shard(dir + "/" + file, static_cast<uint64_t>(integer_field(sh.at("bytes"), mpath, file + ": \"bytes\"")),
                integer_field(sh.at("records"), mpath, file + ": \"records\""), crc);
    }
    if (records != size())
      bad(mpath, fmt::format("split {}: expected {} records, the shards hold {}", sname, records, size()));
  } catch (const nlohmann::json::exception& e) {
    bad(mpath, fmt::format("malformed manifest: {}", e.what()));
  }
  uint64_t total = 0;
  for (const Record& r : records_) total += r.size;
  if (!records_.empty())
    block_size_ = std::max<int64_t>(1, static_cast<int64_t>(kPackedBlockBytes * records_.size() / std::max<uint64_t>(total, 1)));
}

void PackedDataset::map_shard(const std::string& path, uint64_t expected_bytes, int64_t expected_records,
                              int64_t expected_index_crc) {
  TD_CHECK(shard_paths_.size() < 65535, ErrorCode::format, kOp, "{}: more than 65535 shards in one split", path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block
  if (fd < 0) throw_error(ErrorCode::io, kOp, fmt::format("{}: cannot open shard: {}", path, std::strerror(errno)));
  struct stat st {};
  const int rc = ::fstat(fd, &st);
  const int err = errno;
  if (rc != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_error(ErrorCode::io, kOp,
                fmt::format("{}: {}", path, rc != 0 ? std::strerror(err) : "expected a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size != expected_bytes) {
    ::close(fd);
    bad(path, fmt::format("truncated shard: the manifest says {} bytes, found {}", expected_bytes, size));
  }
  if (size < kPackedHeaderBytes + kPackedFooterBytes) {
    ::close(fd);
    bad(path, fmt::format("truncated shard: expected at least {} bytes (header and footer), found {}",
                          kPackedHeaderBytes + kPackedFooterBytes, size));
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int merr = errno;
  ::close(fd);  // the mapping keeps the file
  if (addr == MAP_FAILED) throw_error(ErrorCode::io, kOp, fmt::format("{}: mmap failed: {}", path, std::strerror(merr)));
  maps_.emplace_back(addr, Unmap{static_cast<size_t>(size)});
  shard_paths_.push_back(path);
  const uint8_t* b = static_cast<const uint8_t*>(addr);

  // Header.
  if (std::memcmp(b, packed::kMagic, 8) != 0) bad(path, "bad magic: expected \"TNDMPACK\" (a tandem packed shard)");
  const uint32_t version = packed::get_u32(b + 8);
  if (version != kPackedVersion)
    bad(path, fmt::format("unsupported shard version {}: this build reads version {}", version, kPackedVersion));
  if (packed::get_u32(b + 60) != packed::crc32_of(b, 60)) bad(path, "header CRC32 mismatch: the header is corrupt");
  if (packed::get_u32(b + 12) != kPackedHeaderBytes)
    bad(path, fmt::format("expected a {}-byte header, found {}", kPackedHeaderBytes, packed::get_u32(b + 12)));
  const ImageDims hd{packed::get_u32(b + 16), packed::get_u32(b + 20), packed::get_u32(b + 24)};
  if (!(hd == dims_) || packed::get_u32(b + 28) != classes_.size())
    bad(path, fmt::format("header says dims [{}, {}, {}] and {} classes, the manifest [{}, {}, {}] and {}", hd.channels,
                          hd.height, hd.width, packed::get_u32(b + 28), dims_.channels, dims_.height, dims_.width,
                          classes_.size()));
  // Footer.
  const uint8_t* f = b + size - kPackedFooterBytes;
  if (std::memcmp(f + 24, packed::kEndMagic, 8) != 0) bad(path, "truncated shard: no footer at the end");
  if (packed::get_u32(f + 20) != packed::crc32_of(f, 20)) bad(path, "footer CRC32 mismatch: the footer is corrupt");
  const uint64_t n = packed::get_u64(f), index_offset = packed::get_u64(f + 8);
  const uint64_t index_end = size - kPackedFooterBytes;
  if (index_offset < kPackedHeaderBytes || index_offset > index_end || n > (index_end - index_offset) / kPackedIndexEntryBytes ||
      index_offset + n * kPackedIndexEntryBytes != index_end)
    bad(path, fmt::format("index past the end: {} entries at offset {} do not fit the {} bytes before the footer", n,
                          index_offset, index_end));
  if (static_cast<int64_t>(n) != expected_records)
    bad(path, fmt::format("expected {} records (manifest), the index holds {}", expected_records, n));
  const uint8_t* index = b + index_offset;
  advise(index, n * kPackedIndexEntryBytes, MADV_WILLNEED);
  const uint32_t index_crc = packed::get_u32(f + 16);
  if (index_crc != packed::crc32_of(index, n * kPackedIndexEntryBytes))
    bad(path, "index CRC32 mismatch: the index is corrupt");
  if (expected_index_crc >= 0 && index_crc != static_cast<uint32_t>(expected_index_crc))
    bad(path, fmt::format("shard from another pack: its index CRC32 is {:08x}, the manifest's {:08x}", index_crc,
                          static_cast<uint32_t>(expected_index_crc)));
  const bool raw = dims_.height > 0 && dims_.width > 0;
  for (uint64_t i = 0; i < n; ++i) {
    const packed::Entry e = packed::decode_entry(index + i * kPackedIndexEntryBytes);
    if (e.offset < kPackedHeaderBytes || e.offset > index_offset || e.size > index_offset - e.offset)
      bad(path, fmt::format("record {}: {} bytes at offset {} lie outside the record area [{}, {})", i, e.size,
                            e.offset, kPackedHeaderBytes, index_offset));
    if (e.label >= classes_.size())
      bad(path, fmt::format("record {}: expected a label in [0, {}), found {}", i, classes_.size(), e.label));
    if (e.encoding > 2 || raw != (e.encoding == 0))
      bad(path, fmt::format("record {}: encoding {} in a {} dataset", i, e.encoding, raw ? "raw" : "encoded"));
    if (raw && e.size != static_cast<uint64_t>(dims_.numel()))
      bad(path, fmt::format("record {}: expected {} bytes ([{}, {}, {}]), found {}", i, dims_.numel(), dims_.channels,
                            dims_.height, dims_.width, e.size));
    records_.push_back({b + e.offset, e.size, e.crc, static_cast<int32_t>(e.label),
                        static_cast<uint16_t>(shard_paths_.size() - 1), e.encoding});
  }
}

void PackedDataset::Unmap::operator()(void* addr) const noexcept { ::munmap(addr, size); }

PackedDataset::~PackedDataset() = default;

Sample PackedDataset::get(int64_t index, std::vector<uint8_t>&) const {
  TD_CHECK_ARG(index >= 0 && index < size(), kOp, "expected a sample index in [0, {}), found {}", size(), index);
  const Record& r = records_[static_cast<size_t>(index)];
  const std::string& shard = shard_paths_[r.shard];
  if (verify_crc_ && packed::crc32_of(r.bytes, r.size) != r.crc)
    bad(shard, fmt::format("record at offset {} (split index {}): CRC32 mismatch: the record is corrupt",
                           r.bytes - static_cast<const uint8_t*>(maps_[r.shard].get()), index));
  return {r.bytes, r.label, static_cast<Encoding>(r.encoding), r.size, shard.c_str()};
}

void PackedDataset::prefetch(int64_t index) const noexcept {
  if (index < 0 || index >= size()) return;
  const Record& r = records_[static_cast<size_t>(index)];
  advise(r.bytes, r.size, MADV_WILLNEED);
}

int64_t PackedDataset::label(int64_t index) const {
  TD_CHECK_ARG(index >= 0 && index < size(), kOp, "expected a sample index in [0, {}), found {}", size(), index);
  return records_[static_cast<size_t>(index)].label;
}

std::string PackedDataset::class_name(int64_t label) const {
  if (label < 0 || label >= num_classes()) return Dataset::class_name(label);  // throws
  return classes_[static_cast<size_t>(label)];
}

}  // namespace tandem::data
