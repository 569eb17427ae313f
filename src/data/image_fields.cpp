// ImageFields: an image Dataset + Transform written as the `images` and `labels` fields.
#include "tandem/data/image_fields.h"

#include <cstring>

#include "tandem/data/fused_image_transform.h"
#include "tandem/error.h"
#include "tandem/profile/profiler.h"

namespace tandem::data {

namespace {

constexpr const char* kOp = "loader";

// Rounds n floats into bf16 or f16 (nearest even), as the images field's dtype asks.
void narrow_into(const float* src, void* dst, int64_t n, DType dtype) {
  auto* d = static_cast<uint16_t*>(dst);
  if (dtype == DType::bf16) {
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_f16(src[i]);
  }
}

}  // namespace

ImageFields::ImageFields(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Transform> transform,
                         DType images_dtype)
    : dataset_(std::move(dataset)), transform_(std::move(transform)), dtype_(images_dtype) {
  TD_CHECK_ARG(dataset_ != nullptr, kOp, "expected a dataset, found null");
  TD_CHECK_ARG(images_dtype == DType::f32 || images_dtype == DType::bf16 || images_dtype == DType::f16, kOp,
               "expected images_dtype f32, bf16 or f16, found {}", dtype_name(images_dtype));
  if (!transform_) transform_ = std::make_shared<FusedImageTransform>(FusedImageTransformOptions{});
  size_ = dataset_->size();
  in_dims_ = dataset_->dims();
  out_dims_ = transform_->output_dims(in_dims_);
  fields_ = {Field{"images", images_dtype, {out_dims_.channels, out_dims_.height, out_dims_.width}, FieldRole::input},
             Field{"labels", DType::i64, {}, FieldRole::target, dataset_->num_classes()}};
}

void ImageFields::write(int64_t index, const SampleKey& key, std::byte* const* out, SampleScratch& scratch,
                        WriteTimes* times) const {
  const int64_t a = times ? profile::now_ns() : 0;
  const Sample smp = dataset_->get(index, scratch.sample);
  const int64_t b = times ? profile::now_ns() : 0;
  const bool narrow = dtype_ != DType::f32;
  const int64_t numel = out_dims_.numel();
  if (narrow) scratch.floats.resize(static_cast<size_t>(numel));
  float* dst = narrow ? scratch.floats.data() : reinterpret_cast<float*>(out[0]);
  transform_->apply_sample(smp, in_dims_, dst, key, scratch.transform);
  if (times) {
    const int64_t c = profile::now_ns();
    times->load_ns += b - a;
    times->augment_ns += c - b;
  }
  if (narrow) narrow_into(dst, out[0], numel, dtype_);
  std::memcpy(out[1], &smp.label, sizeof(int64_t));
}

}  // namespace tandem::data
