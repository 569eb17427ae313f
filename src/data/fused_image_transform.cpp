#include "tandem/data/fused_image_transform.h"

#include <algorithm>
#include <cstring>

#include "tandem/error.h"
#include "tandem/rng.h"

namespace tandem::data {

namespace {
constexpr const char* kOp = "transform";

// Four pixels from one 32-bit load: out[0..3] = lut[src[0..3]] (Forward) or
// out[0..3] = lut[src[3..0]] (reversed, for flipped rows).
template <bool Reverse>
inline void lut4(float* __restrict out, const uint8_t* __restrict src, const float* __restrict lut) {
  uint32_t w;
  std::memcpy(&w, src, 4);  // little-endian: byte k is src[k]
  const float a = lut[w & 255u], b = lut[(w >> 8) & 255u], c = lut[(w >> 16) & 255u], d = lut[w >> 24];
  if constexpr (Reverse) {
    out[0] = d, out[1] = c, out[2] = b, out[3] = a;
  } else {
    out[0] = a, out[1] = b, out[2] = c, out[3] = d;
  }
}

// One output row: zeros left of x0, lut[src[x + off]] for x in [x0, x1), zeros from x1 on;
// with Flip the row is written back to front (out[w - 1 - x]). Branch-free inner loops,
// four pixels per step.
template <bool Flip>
inline void write_row(float* __restrict out, const uint8_t* __restrict src, int64_t off, int64_t x0, int64_t x1,
                      int64_t w, const float* __restrict lut, float zero) {
  if constexpr (!Flip) {
    for (int64_t x = 0; x < x0; ++x) out[x] = zero;
    int64_t x = x0;
    for (; x + 4 <= x1; x += 4) lut4<false>(out + x, src + x + off, lut);
    for (; x < x1; ++x) out[x] = lut[src[x + off]];
    for (int64_t x = x1; x < w; ++x) out[x] = zero;
  } else {
    // out[j] = crop[w - 1 - j] for j in [w - x1, w - x0): source column last - j.
    const int64_t last = off + w - 1;
    for (int64_t j = 0; j < w - x1; ++j) out[j] = zero;
    int64_t j = w - x1;
    for (; j + 4 <= w - x0; j += 4) lut4<true>(out + j, src + (last - j - 3), lut);
    for (; j < w - x0; ++j) out[j] = lut[src[last - j]];
    for (int64_t j = w - x0; j < w; ++j) out[j] = zero;
  }
}
}  // namespace

FusedImageTransform::FusedImageTransform(FusedImageTransformOptions o) : opt_(std::move(o)) {
  TD_CHECK_ARG(opt_.pad >= 0, kOp, "expected pad >= 0, found {}", opt_.pad);
  TD_CHECK_ARG(opt_.crop_height >= 0 && opt_.crop_width >= 0, kOp,
               "expected crop sizes >= 0 (0 = input size), found {}x{}", opt_.crop_height, opt_.crop_width);
  TD_CHECK_ARG(opt_.flip_p >= 0.0f && opt_.flip_p <= 1.0f, kOp, "expected flip_p in [0, 1], found {}", opt_.flip_p);
  TD_CHECK_ARG(!opt_.mean.empty() && opt_.mean.size() == opt_.std.size(), kOp,
               "expected mean and std of the same non-zero length, found {} and {}", opt_.mean.size(),
               opt_.std.size());
  lut_.resize(opt_.mean.size() * 256);
  for (size_t c = 0; c < opt_.mean.size(); ++c) {
    TD_CHECK_ARG(opt_.std[c] > 0.0f, kOp, "expected std > 0, found std[{}] = {}", c, opt_.std[c]);
    // f32 throughout and in PyTorch's order: (v / 255 - mean) / std.
    for (int v = 0; v < 256; ++v)
      lut_[c * 256 + static_cast<size_t>(v)] = (static_cast<float>(v) / 255.0f - opt_.mean[c]) / opt_.std[c];
  }
}

FusedImageTransformOptions FusedImageTransform::fashion_mnist_train() {
  FusedImageTransformOptions o;
  o.pad = 2;
  o.crop_height = 28;
  o.crop_width = 28;
  o.flip_p = 0.5f;
  o.mean = {0.2860f};
  o.std = {0.3530f};
  return o;
}

FusedImageTransformOptions FusedImageTransform::fashion_mnist_eval() {
  FusedImageTransformOptions o;
  o.mean = {0.2860f};
  o.std = {0.3530f};
  return o;
}

ImageDims FusedImageTransform::output_dims(const ImageDims& in) const {
  const int64_t ch = opt_.crop_height ? opt_.crop_height : in.height;
  const int64_t cw = opt_.crop_width ? opt_.crop_width : in.width;
  TD_CHECK_ARG(ch <= in.height + 2 * opt_.pad && cw <= in.width + 2 * opt_.pad, kOp,
               "expected a crop no larger than the padded image {}x{} (pad {}), found crop {}x{}",
               in.height + 2 * opt_.pad, in.width + 2 * opt_.pad, opt_.pad, ch, cw);
  TD_CHECK_ARG(opt_.mean.size() == 1 || static_cast<int64_t>(opt_.mean.size()) == in.channels, kOp,
               "expected 1 or {} values of mean/std (one per channel), found {}", in.channels, opt_.mean.size());
  return {in.channels, ch, cw};
}

AugmentParams FusedImageTransform::params(const SampleKey& key, const ImageDims& in) const {
  AugmentParams p;
  const int64_t ch = opt_.crop_height ? opt_.crop_height : in.height;
  const int64_t cw = opt_.crop_width ? opt_.crop_width : in.width;
  const int64_t ry = in.height + 2 * opt_.pad - ch;  // offsets in [0, ry]
  const int64_t rx = in.width + 2 * opt_.pad - cw;
  if (ry == 0 && rx == 0 && opt_.flip_p == 0.0f) return p;
  const uint64_t index = static_cast<uint64_t>(key.index);
  Philox rng(key.seed, key.epoch, static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32));
  p.dy = static_cast<int64_t>(rng.randint64(static_cast<uint64_t>(ry) + 1));
  p.dx = static_cast<int64_t>(rng.randint64(static_cast<uint64_t>(rx) + 1));
  p.flip = rng.uniform() < opt_.flip_p;
  return p;
}

void FusedImageTransform::apply(const uint8_t* in, const ImageDims& d, float* out, const SampleKey& key) const {
  const AugmentParams p = params(key, d);
  const int64_t ch = opt_.crop_height ? opt_.crop_height : d.height;
  const int64_t cw = opt_.crop_width ? opt_.crop_width : d.width;
  const int64_t pad = opt_.pad;
  // Output column x reads input column x + off; valid for x in [x0, x1).
  const int64_t off = p.dx - pad;
  const int64_t x0 = std::clamp<int64_t>(-off, 0, cw);
  const int64_t x1 = std::clamp<int64_t>(d.width - off, x0, cw);
  for (int64_t c = 0; c < d.channels; ++c) {
    const float* lut = lut_.data() + lut_index(c) * 256;
    const float zero = lut[0];
    const uint8_t* src = in + c * d.height * d.width;
    float* o = out + c * ch * cw;
    for (int64_t y = 0; y < ch; ++y, o += cw) {
      const int64_t sy = y + p.dy - pad;
      if (sy < 0 || sy >= d.height) {
        std::fill(o, o + cw, zero);
        continue;
      }
      const uint8_t* row = src + sy * d.width;
      if (p.flip)
        write_row<true>(o, row, off, x0, x1, cw, lut, zero);
      else
        write_row<false>(o, row, off, x0, x1, cw, lut, zero);
    }
  }
}

}  // namespace tandem::data
