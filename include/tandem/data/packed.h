// Packed datasets: a folder of shard files holding the samples' bytes (encoded JPEG/PNG as
// they were, or raw [C, H, W] u8 records), their labels, an index and a CRC32 per record, plus
// a manifest. Written by write_packed() (`tandem pack`), read by PackedDataset through mmap.
//
// Folder:  OUT/manifest.json   {"format": "tandem-packed", "version": 1,
//                               "dims": [C, H, W] (H = W = 0: encoded), "classes": [names],
//                               "splits": {"train": {"records": N, "shards": [{"file":
//                               "train-00000.tpk", "records": n, "bytes": b, "index_crc": c},
//                               ...]}, "test": ...}}  (index_crc: the footer's CRC32 of the
//                               index, so a shard of another pack with the same size is refused;
//                               optional when reading)
//          OUT/<split>-NNNNN.tpk  shards, in order; record i of a split is counted through them
// Shard (version 1, every integer little-endian):
//   header, 64 bytes at offset 0:
//     [0, 8)   magic "TNDMPACK"
//     [8, 12)  u32 version (1)
//     [12, 16) u32 header size in bytes (64)
//     [16, 28) u32 channels, height, width (the dataset's dims; 0 height/width: encoded)
//     [28, 32) u32 number of classes
//     [32, 60) zero
//     [60, 64) u32 CRC32 of bytes [0, 60)
//   records, back to back from offset 64 (no padding)
//   index, at index_offset: one 24-byte entry per record:
//     u64 offset of the record in the shard, u32 size in bytes, u32 CRC32 of the record's bytes,
//     u32 label, u8 encoding (0 raw, 1 jpeg, 2 png), 3 zero bytes
//   footer, the last 32 bytes:
//     u64 number of records, u64 index_offset, u32 CRC32 of the index, u32 CRC32 of footer
//     bytes [0, 20), then the magic "TNDMEND\0"
// CRC32 is zlib's crc32() (ISO-HDLC / IEEE 802.3, the gzip and PNG checksum).
// Writing streams records into the shard, then the index and the footer; each shard and the
// manifest are written atomically (atomic_file.h), the manifest last, so a folder with a
// manifest is complete.
// Thread-safety: PackedDataset is immutable after construction; get() may be called
// concurrently. write_packed() runs on the calling thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tandem/data/dataset.h"
#include "tandem/data/open_dataset.h"

namespace tandem::data {

inline constexpr uint32_t kPackedVersion = 1;
inline constexpr size_t kPackedHeaderBytes = 64;
inline constexpr size_t kPackedIndexEntryBytes = 24;
inline constexpr size_t kPackedFooterBytes = 32;
/// The byte span a sampler block should cover: records within it are read together by the
/// kernel's readahead (Linux's default read_ahead_kb is 128).
inline constexpr size_t kPackedBlockBytes = 128 * 1024;

struct PackOptions {
  uint64_t shard_size_bytes = uint64_t{256} << 20;  // a shard is closed once its records reach this size
};

struct PackSplit {
  std::string name;      // "train", "test"
  const Dataset* data;   // not owned
};

struct PackResult {
  int64_t records = 0;  // over all splits
  uint64_t bytes = 0;   // of all shards
  int shards = 0;
};

/// Writes `splits` into folder `out_dir` (created when missing) as the format above. An
/// existing `out_dir` must be empty or hold only an earlier pack (manifest.json, *.tpk and
/// their temporary files), else Error(invalid_argument) "<out_dir>: expected a new or empty
/// folder, or one holding an earlier pack, found <file> ..."; shards of the earlier pack that
/// the new manifest does not name are removed after it is written. Every
/// split must have the dims and num_classes of the first; class names come from the first.
/// Records are the samples' bytes as get() returns them (raw: dims().numel() bytes; encoded:
/// `size` bytes). Throws Error(invalid_argument) for a shard size of 0 or splits that
/// disagree, Error(io) when a file cannot be written (nothing half-written is left: shards
/// already committed stay, but no manifest names them), and whatever the datasets' get() throws.
PackResult write_packed(const std::vector<PackSplit>& splits, const std::string& out_dir,
                        const PackOptions& options = {});

struct PackedOptions {
  /// Check every record's CRC32 at get(). zlib's crc32 runs at about 2.3 GB/s per core on
  /// this machine's zlib: ~12 us for a 28 KB 500x375 JPEG (decoding it takes ~450 us, so ~3%),
  /// ~1.3 us for a 3 KB raw CIFAR record (where it is most of get()'s cost, which is otherwise
  /// a pointer). false skips it; headers, footers and indexes are checked at open anyway.
  bool verify_crc = true;
};

class PackedDataset final : public Dataset {
 public:
  /// Opens split `split` ("train" / "test") of the packed folder `dir`: reads the manifest,
  /// maps every shard (mmap PROT_READ, MAP_PRIVATE; the index pages madvise WILLNEED) and
  /// checks each shard's header, footer and index (CRCs, entries within the record area,
  /// labels < num_classes, raw sizes = dims().numel(), counts as the manifest says).
  /// Throws Error(io) for a missing or unreadable manifest or shard, Error(format) naming the
  /// shard (or manifest) for a bad magic, an unsupported version, a CRC mismatch, a shard
  /// whose size is not the manifest's ("truncated shard"), an index past the end, or a split
  /// the manifest does not have, or a shard whose index CRC32 is not the manifest's "index_crc"
/// ("shard from another pack").
  PackedDataset(const std::string& dir, Split split, const PackedOptions& options = {});
  ~PackedDataset() override;
  PackedDataset(const PackedDataset&) = delete;
  PackedDataset& operator=(const PackedDataset&) = delete;

  int64_t size() const override { return static_cast<int64_t>(records_.size()); }
  ImageDims dims() const override { return dims_; }
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  /// The record as stored, pointing into the mapping (no copy; `scratch` unused); source is
  /// the shard's path. Throws Error(invalid_argument) for an index out of range,
  /// Error(format) "<shard>: record <i> (split index <j>): CRC32 mismatch" when verifying.
  Sample get(int64_t index, std::vector<uint8_t>& scratch) const override;
  /// madvise(MADV_WILLNEED) over the record's pages.
  void prefetch(int64_t index) const noexcept override;
  int64_t label(int64_t index) const override;
  std::string class_name(int64_t label) const override;

  /// Records per kPackedBlockBytes at the split's mean record size (at least 1): the
  /// block_size to give BlockShuffleSampler (block_shuffle_sampler.h).
  int64_t block_size() const override { return block_size_; }
  /// The shard files, in order.
  const std::vector<std::string>& shards() const { return shard_paths_; }

 private:
  struct Record {
    const uint8_t* bytes;
    uint32_t size;
    uint32_t crc;
    int32_t label;
    uint16_t shard;
    uint8_t encoding;
  };
  struct Unmap {  // munmap on destruction, also when the constructor throws half-way
    size_t size;
    void operator()(void* addr) const noexcept;
  };
  using Mapping = std::unique_ptr<void, Unmap>;
  // expected_index_crc: the manifest's "index_crc", or -1 when absent.
  void map_shard(const std::string& path, uint64_t expected_bytes, int64_t expected_records,
                 int64_t expected_index_crc);

  std::vector<std::string> shard_paths_;
  std::vector<Mapping> maps_;
  std::vector<Record> records_;
  std::vector<std::string> classes_;
  ImageDims dims_;
  int64_t block_size_ = 1;
  bool verify_crc_;
};

}  // namespace tandem::data
