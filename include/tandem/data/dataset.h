// Dataset: random access to image samples. A dataset hands out a sample either as raw u8
// pixels [C, H, W] (IDX, CIFAR: one fixed shape, dims()) or as the encoded bytes of an image
// file (JPEG, PNG: each its own size, decoded by the transform on the loader's worker); a
// Transform (transform.h) turns it into f32 written straight into a batch slot, so a sample is
// never copied between the two. The loader sees a Dataset with its Transform as the typed fields
// `images` and `labels` (ImageFields, tandem/data/image_fields.h); data sets of other fields
// (token windows) implement FieldDataset (tandem/data/field_dataset.h) instead.
// A classification dataset: every label is in [0, num_classes()).
// Thread-safety: size(), dims(), num_classes() and get() are const and may be called concurrently from the
// loader's worker threads; each thread passes its own scratch buffer to get().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::data {

/// Shape of one image sample, [C, H, W], in elements. A dataset whose samples differ in size
/// (an image folder) reports height = width = 0 in dims().
struct ImageDims {
  int64_t channels = 1;
  int64_t height = 0;
  int64_t width = 0;
  int64_t numel() const { return channels * height * width; }
  friend bool operator==(const ImageDims&, const ImageDims&) = default;
};

/// How a sample's bytes are stored.
enum class Encoding {
  raw,   // u8 pixels [C, H, W] of the dataset's dims()
  jpeg,  // the bytes of a JPEG file (JFIF/Exif/Adobe)
  png,   // the bytes of a PNG file
};

/// One sample, valid until the dataset is destroyed or the same scratch buffer is passed to
/// get() again. raw: `pixels` points to dims().numel() u8 values laid out [C, H, W];
/// jpeg/png: `pixels` points to `size` bytes of the encoded file.
struct Sample {
  const uint8_t* pixels = nullptr;
  int64_t label = 0;
  Encoding encoding = Encoding::raw;
  size_t size = 0;               // bytes at `pixels` for jpeg/png (raw: unused)
  const char* source = nullptr;  // where it came from for error messages (a file path), or null
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Number of samples.
  virtual int64_t size() const = 0;
  /// Shape of every sample, [C, H, W].
  virtual ImageDims dims() const = 0;
  /// Number of classes; every sample's label is in [0, num_classes()). At least 1.
  virtual int64_t num_classes() const = 0;
  /// Sample `index` in [0, size()). In-memory datasets return pointers into their own
  /// storage; decoding datasets decode into `scratch` (per calling thread, reused).
  /// May throw tandem::Error (e.g. a corrupt record); the loader reports it with the index.
  virtual Sample get(int64_t index, std::vector<uint8_t>& scratch) const = 0;
  /// A hint that get(index) follows soon (e.g. start fetching its bytes into cache). Never
  /// throws; the default does nothing.
  virtual void prefetch(int64_t index) const noexcept {}
  /// The label of sample `index` without reading its pixels where the format allows (counting
  /// classes); the default calls get(). Throws as get().
  virtual int64_t label(int64_t index) const;
  /// The name of class `label` in [0, num_classes()) (a folder name, "T-shirt/top"); the
  /// default is the number. Throws Error(invalid_argument) for a label out of range.
  virtual std::string class_name(int64_t label) const;
  /// Samples per storage block for a block-local shuffle (BlockShuffleSampler): packed shards
  /// say how many records share a block of reads; 0 (the default) for a set without blocks.
  virtual int64_t block_size() const { return 0; }
};

}  // namespace tandem::data
