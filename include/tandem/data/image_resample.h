// Antialiased bilinear resampling of RGB u8 pixels to normalized f32 planes, the last step of
// an ImageNet-style transform. Filter: the triangle (tent) kernel max(0, 1 - |t|), widened by
// the downscale factor, as PIL's Image.resize(BILINEAR) and torchvision's resize(...,
// antialias=True) use it: for an output index i along an axis with scale s (input pixels per
// output pixel) and box start x0, the sample centre is c = x0 + (i + 0.5) * s, the support is
// r = max(s, 1), the taps are the input indices k in [int(c - r + 0.5), int(c + r + 0.5))
// clipped to the view, each weighted tent((k + 0.5 - c) / max(s, 1)), and the weights are
// divided by their sum. The two axes are applied separably (vertical, then horizontal) in f32;
// no intermediate rounding, so values are torchvision's float path and within about one u8
// level of its uint8 path (which rounds after each pass).
// Thread-safety: reentrant; concurrent calls need their own `work` buffers.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace tandem::data {

/// RGB u8 pixels [height, width, 3], rows `row_stride` bytes apart (>= width * 3). A view
/// may be a rectangle inside a larger image; taps are clipped to the view.
struct RgbView {
  const uint8_t* pixels = nullptr;
  int64_t width = 0;
  int64_t height = 0;
  int64_t row_stride = 0;
};

/// Where the output samples the view, in the view's pixel coordinates: output column j
/// centres on x0 + (j + 0.5) * scale_x, row i on y0 + (i + 0.5) * scale_y (scales > 0).
/// Resizing a w x h crop at (x, y) to out_w x out_h is {x, y, w / out_w, h / out_h} on a view
/// of the crop with x = y = 0; Resize then CenterCrop at (left, top) is {left * s_x, top * s_y,
/// s_x, s_y} on the whole image, s = input size / resized size.
struct ResampleBox {
  double x0 = 0.0;
  double y0 = 0.0;
  double scale_x = 1.0;
  double scale_y = 1.0;
};

/// The per-channel affine map applied to each resampled value v (in u8 levels, 0..255):
/// out = v * mul[c] + add[c]. normalize_affine gives torchvision's Normalize of x / 255.
struct ChannelAffine {
  std::array<float, 3> mul{1.0f, 1.0f, 1.0f};
  std::array<float, 3> add{0.0f, 0.0f, 0.0f};
};

/// mul = 1 / (255 * std[c]), add = -mean[c] / std[c], computed in double: out equals
/// (v / 255 - mean[c]) / std[c] up to f32 rounding.
ChannelAffine normalize_affine(const std::array<float, 3>& mean, const std::array<float, 3>& std);

/// Writes f32 [3, out_h, out_w] (channel planes R, G, B) to `out`: the view resampled through
/// `box`, mirrored along W when `flip` (out[c][i][j] takes the value of column out_w - 1 - j),
/// mapped by `affine`. `work` is reused scratch (grows, never shrinks). Expects a non-empty
/// view, out_h, out_w > 0 and positive scales (the caller checks; violations are
/// Error(internal)). A box reaching outside the view uses the taps inside it.
void resample_rgb_to_chw(const RgbView& src, const ResampleBox& box, int64_t out_h, int64_t out_w,
                         bool flip, const ChannelAffine& affine, float* out,
                         std::vector<float>& work);

}  // namespace tandem::data
