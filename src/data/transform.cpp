// Transform::apply_sample's default: raw samples go to apply(); encoded ones need a decoding
// transform (image_transform.h).
#include "tandem/data/transform.h"

#include "tandem/error.h"

namespace tandem::data {

void Transform::apply_sample(const Sample& sample, const ImageDims& in_dims, float* out, const SampleKey& key,
                             TransformScratch&) const {
  TD_CHECK(sample.encoding == Encoding::raw, ErrorCode::format, "transform",
           "{}: an encoded image needs a decoding transform, expected raw pixels",
           sample.source ? sample.source : "sample");
  apply(sample.pixels, in_dims, out, key);
}

}  // namespace tandem::data
