// ImageFields: an image Dataset and its Transform seen as typed fields, what the Loader collates
// for image classification:
//   images  [C', H', W'] in `images_dtype` (f32; bf16 or f16 under mixed precision), input:
//           the transform's f32 output (Transform::apply_sample), rounded to nearest even
//           once as it is written when the dtype is narrower;
//   labels  [] i64, target, checked to be in [0, num_classes()) by the loader.
// Thread-safety: as FieldDataset; the dataset and the transform are shared, read-only.
#pragma once

#include <memory>
#include <vector>

#include "tandem/data/dataset.h"
#include "tandem/data/field_dataset.h"
#include "tandem/data/transform.h"

namespace tandem::data {

class ImageFields final : public FieldDataset {
 public:
  /// `transform` null: pixels become f32 v / 255 (FusedImageTransform's defaults). Throws
  /// Error(invalid_argument, "[loader] ...") for a null dataset, an images_dtype other than f32,
  /// bf16 or f16, and what the transform's output_dims() throws for the dataset's dims().
  ImageFields(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Transform> transform,
              DType images_dtype = DType::f32);

  int64_t size() const override { return size_; }
  const std::vector<Field>& fields() const override { return fields_; }
  /// Reads sample `index` (get), transforms it into out[0] and writes its label into out[1].
  /// Throws what the dataset's get() and the transform throw.
  void write(int64_t index, const SampleKey& key, std::byte* const* out, SampleScratch& scratch,
             WriteTimes* times) const override;
  void prefetch(int64_t index) const noexcept override { dataset_->prefetch(index); }
  int64_t block_size() const override { return dataset_->block_size(); }

  const Dataset& dataset() const { return *dataset_; }
  /// The shape the transform makes of every sample, [C', H', W'].
  ImageDims dims() const { return out_dims_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<const Transform> transform_;
  ImageDims in_dims_, out_dims_;
  int64_t size_ = 0;
  DType dtype_;
  std::vector<Field> fields_;
};

}  // namespace tandem::data
