// Shared by the image transform tests: the formula images of scripts/golden_image_transforms.py
// and a float64 reference of the antialiased bilinear resize written from its definition
// (PIL / torchvision antialias=True: tent filter widened by the downscale factor).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tandem::testing {

/// Pixel (y, x, c) of formula image k; must match formula() in the golden script.
inline uint8_t formula_pixel(int k, int64_t y, int64_t x, int64_t c) {
  return static_cast<uint8_t>((x * 17 + y * 29 + c * 83 + ((x * y + k * 5) % 23) * 11 + k * 40) %
                              256);
}

/// Formula image k as RGB u8 [height, width, 3].
inline std::vector<uint8_t> formula_hwc(int k, int64_t width, int64_t height) {
  std::vector<uint8_t> v(static_cast<size_t>(width * height * 3));
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (int64_t c = 0; c < 3; ++c)
        v[static_cast<size_t>((y * width + x) * 3 + c)] = formula_pixel(k, y, x, c);
  return v;
}

/// The same image as u8 [3, height, width] planes.
inline std::vector<uint8_t> formula_chw(int k, int64_t width, int64_t height) {
  std::vector<uint8_t> v(static_cast<size_t>(width * height * 3));
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x)
        v[static_cast<size_t>((c * height + y) * width + x)] = formula_pixel(k, y, x, c);
  return v;
}

/// Weights of output index i along an axis of `in` pixels: centre x0 + (i + 0.5) * scale,
/// tent of radius max(scale, 1), taps inside [0, in), normalised. Dense: one weight per input.
inline std::vector<double> reference_weights(int64_t i, double x0, double scale, int64_t in) {
  const double r = std::max(scale, 1.0), centre = x0 + (static_cast<double>(i) + 0.5) * scale;
  std::vector<double> w(static_cast<size_t>(in));
  double sum = 0;
  for (int64_t k = 0; k < in; ++k) {
    w[static_cast<size_t>(k)] =
        std::max(0.0, 1.0 - std::abs((static_cast<double>(k) + 0.5 - centre) / r));
    sum += w[static_cast<size_t>(k)];
  }
  for (double& v : w) v /= sum;
  return w;
}

/// float64 resize of the region [x, x + w) x [y, y + h) of an RGB [H, W, 3] image (taps inside
/// the region) through box (bx0, by0, sx, sy) relative to it, to [3, out_h, out_w] in u8 levels.
inline std::vector<double> reference_resample(const std::vector<uint8_t>& hwc, int64_t width,
                                              int64_t x, int64_t y, int64_t w, int64_t h,
                                              double bx0, double by0, double sx, double sy,
                                              int64_t out_h, int64_t out_w) {
  std::vector<double> out(static_cast<size_t>(3 * out_h * out_w), 0.0);
  for (int64_t i = 0; i < out_h; ++i) {
    const std::vector<double> wy = reference_weights(i, by0, sy, h);
    for (int64_t j = 0; j < out_w; ++j) {
      const std::vector<double> wx = reference_weights(j, bx0, sx, w);
      for (int64_t c = 0; c < 3; ++c) {
        double acc = 0;
        for (int64_t yy = 0; yy < h; ++yy) {
          if (wy[static_cast<size_t>(yy)] == 0.0) continue;
          for (int64_t xx = 0; xx < w; ++xx)
            acc += wy[static_cast<size_t>(yy)] * wx[static_cast<size_t>(xx)] *
                   hwc[static_cast<size_t>(((y + yy) * width + x + xx) * 3 + c)];
        }
        out[static_cast<size_t>((c * out_h + i) * out_w + j)] = acc;
      }
    }
  }
  return out;
}

}  // namespace tandem::testing
