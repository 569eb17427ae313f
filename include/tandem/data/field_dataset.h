// FieldDataset: random access to samples made of typed fields (tandem/data/field.h), each
// sample written by the data set straight into the loader's batch slot, one destination per
// field. It is what the Loader collates: image data sets reach it through ImageFields
// (tandem/data/image_fields.h: a Dataset and its Transform), a token data set implements it
// directly (windows of a token array: `tokens` [T] input, `targets` [T] target).
// Randomness (augmentation) must be a pure function of the SampleKey, so batches are the same
// for any number of loader workers and a resumed run sees the same data.
// Thread-safety: size(), fields(), prefetch() and write() are const and called concurrently by
// the loader's workers; each thread passes its own SampleScratch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tandem/data/field.h"
#include "tandem/data/transform.h"

namespace tandem::data {

/// Per-thread working memory write() may use; each loader thread owns one and reuses it, so a
/// data set allocates only while the buffers grow.
struct SampleScratch {
  std::vector<uint8_t> sample;  // bytes read or decoded from storage
  TransformScratch transform;   // a transform's buffers
  std::vector<float> floats;    // a sample in f32 before it is rounded into a narrower field
};

/// Where write() spent its time, summed over a batch's samples, in nanoseconds: reading
/// (load) and transforming (augment). The loader passes one only while the profiler is on.
struct WriteTimes {
  int64_t load_ns = 0;
  int64_t augment_ns = 0;
};

class FieldDataset {
 public:
  virtual ~FieldDataset() = default;
  /// Number of samples.
  virtual int64_t size() const = 0;
  /// The fields of every sample, in the order of write()'s destinations and of a batch's
  /// tensors: at least one, each with a distinct name.
  virtual const std::vector<Field>& fields() const = 0;
  /// Writes sample `index` in [0, size()), whose random draws are keyed by `key` (key.index ==
  /// index), into out[f] for each field f: fields()[f].bytes() bytes, laid out as the field's
  /// shape in row-major order. No allocation once the scratch buffers have grown. Throws
  /// Error(io) or Error(format) for a sample that cannot be read (the loader's skip_corrupt
  /// replaces it), other tandem::Errors for other faults. `times`, when not null, gets the
  /// sample's load and augment times added.
  virtual void write(int64_t index, const SampleKey& key, std::byte* const* out, SampleScratch& scratch,
                     WriteTimes* times) const = 0;
  /// A hint that write(index) follows soon (start reading its bytes). Never throws; the
  /// default does nothing.
  virtual void prefetch(int64_t index) const noexcept {}
  /// Samples per storage block for a block-local shuffle (BlockShuffleSampler), 0 (the
  /// default) for a set without blocks; image fields give their Dataset's.
  virtual int64_t block_size() const { return 0; }
};

}  // namespace tandem::data
