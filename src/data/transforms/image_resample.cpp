// Separable antialiased bilinear resampling (see image_resample.h for the filter): per-axis
// weight tables built once per call, a vertical pass from u8 rows into one f32 RGB row, then
// a horizontal pass with four-lane vectors (R, G, B and a lane that is thrown away) that
// applies the affine map while writing the three output planes. The flip is the x table
// built back to front.
#include "tandem/data/image_resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tandem/error.h"

namespace tandem::data {

namespace {

// Four f32 lanes (GCC/Clang vector extension: SSE on x86-64, NEON on ARM).
typedef float v4f __attribute__((vector_size(16)));

inline v4f load4(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// One axis's taps: output i reads `count` inputs from `start` (absolute view index) with
// weights w[i * kmax ...], zero-padded to kmax. Starts and counts are stored as floats in the
// caller's buffer (exact: view sizes are far below 2^24).
struct AxisTable {
  int64_t kmax = 0;
  int64_t lo = 0;  // smallest start
  int64_t hi = 0;  // largest start + count
  float* start = nullptr;
  float* count = nullptr;
  float* w = nullptr;
};

struct Taps {
  int64_t first;
  int64_t end;
  double centre;
};

Taps taps_for(int64_t i, double x0, double scale, double support, int64_t in) {
  const double centre = x0 + (static_cast<double>(i) + 0.5) * scale;
  // int() truncates toward zero as in PIL and ATen; the clip to [0, in) follows.
  int64_t first = std::max<int64_t>(static_cast<int64_t>(centre - support + 0.5), 0);
  int64_t end = std::min<int64_t>(static_cast<int64_t>(centre + support + 0.5), in);
  if (end <= first) {  // the box lies outside the view: take the nearest pixel
    first = std::clamp<int64_t>(static_cast<int64_t>(std::floor(centre)), 0, in - 1);
    end = first + 1;
  }
  return {first, end, centre};
}

int64_t axis_kmax(double x0, double scale, int64_t out, int64_t in) {
  const double support = std::max(scale, 1.0);
  int64_t kmax = 1;
  for (int64_t i = 0; i < out; ++i) {
    const Taps t = taps_for(i, x0, scale, support, in);
    kmax = std::max(kmax, t.end - t.first);
  }
  return kmax;
}

// Entry i of the table holds output i's taps, or output out - 1 - i's when `reverse` (the flip).
void fill_axis(AxisTable& a, double x0, double scale, int64_t out, int64_t in, bool reverse) {
  const double support = std::max(scale, 1.0), inv = 1.0 / support;
  a.lo = in;
  a.hi = 0;
  for (int64_t i = 0; i < out; ++i) {
    const Taps t = taps_for(i, x0, scale, support, in);
    const int64_t n = t.end - t.first;
    const auto tent = [&](int64_t k) {
      return std::max(0.0,
                      1.0 - std::abs((static_cast<double>(t.first + k) + 0.5 - t.centre) * inv));
    };
    double sum = 0.0;
    for (int64_t k = 0; k < n; ++k) sum += tent(k);
    const int64_t e = reverse ? out - 1 - i : i;
    float* w = a.w + e * a.kmax;
    for (int64_t k = 0; k < a.kmax; ++k) {
      // Taps that all lie on the rim of the filter (weight 0, the fallback above): their mean.
      const double v = k >= n ? 0.0 : sum > 0.0 ? tent(k) / sum : 1.0 / static_cast<double>(n);
      w[k] = static_cast<float>(v);
    }
    a.start[e] = static_cast<float>(t.first);
    a.count[e] = static_cast<float>(n);
    a.lo = std::min(a.lo, t.first);
    a.hi = std::max(a.hi, t.end);
  }
}

// The two passes are built for AVX2 and for the baseline, picked at load time. FMA stays
// off, so every build computes the same products and sums in the same order: the same bits.
// Not under ThreadSanitizer: GCC instruments the clones' resolver, which the loader runs
// before TSan's runtime is up (the program dies before main).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define TANDEM_RESAMPLE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TANDEM_RESAMPLE_CLONES
#endif

// row[t] = sum_k w[k] * rows[k][t] for t in [0, n): the vertical pass over one output row.
TANDEM_RESAMPLE_CLONES void vertical(float* __restrict row, const uint8_t* __restrict src,
                                     int64_t stride, int64_t taps, const float* __restrict w,
                                     int64_t n) {
  const float w0 = w[0];
  for (int64_t t = 0; t < n; ++t) row[t] = w0 * static_cast<float>(src[t]);
  for (int64_t k = 1; k < taps; ++k) {
    const uint8_t* __restrict s = src + k * stride;
    const float wk = w[k];
    for (int64_t t = 0; t < n; ++t) row[t] += wk * static_cast<float>(s[t]);
  }
}

// Output pixel e of the table: its taps over the f32 RGB row, as lanes (R, G, B, next R).
// K > 0 fixes the tap count at compile time (the loop unrolls); K = 0 reads it from the table.
template <int K>
inline v4f pixel(const float* __restrict row, const AxisTable& ax, int64_t e) {
  const int64_t kmax = K > 0 ? K : ax.kmax;
  const float* w = ax.w + e * kmax;
  const float* p = row + 3 * (static_cast<int64_t>(ax.start[e]) - ax.lo);
  v4f acc = load4(p) * w[0];
  for (int64_t k = 1; k < kmax; ++k) acc += load4(p + 3 * k) * w[k];
  return acc;
}

inline v4f splat(float v) {
  return v4f{v, v, v, v};
}

// The horizontal pass over one f32 RGB row (pixel p at row[3 * p]), writing output row i of
// each plane: four outputs at a time, transposed from pixels (RGB lanes) to planes. Lane 3 of
// every load is the next pixel's red, multiplied and then dropped.
template <int K>
inline void horizontal_k(const float* __restrict row, const AxisTable& ax, int64_t out_w,
                         const ChannelAffine& af, float* __restrict r, float* __restrict g,
                         float* __restrict b) {
  const v4f mr = splat(af.mul[0]), mg = splat(af.mul[1]), mb = splat(af.mul[2]);
  const v4f ar = splat(af.add[0]), ag = splat(af.add[1]), ab = splat(af.add[2]);
  int64_t j = 0;
  for (; j + 4 <= out_w; j += 4) {
    const v4f p0 = pixel<K>(row, ax, j), p1 = pixel<K>(row, ax, j + 1);
    const v4f p2 = pixel<K>(row, ax, j + 2), p3 = pixel<K>(row, ax, j + 3);
    const v4f rg01 = __builtin_shufflevector(p0, p1, 0, 4, 1, 5);
    const v4f rg23 = __builtin_shufflevector(p2, p3, 0, 4, 1, 5);
    const v4f b01 = __builtin_shufflevector(p0, p1, 2, 6, 3, 7);
    const v4f b23 = __builtin_shufflevector(p2, p3, 2, 6, 3, 7);
    const v4f vr = __builtin_shufflevector(rg01, rg23, 0, 1, 4, 5) * mr + ar;
    const v4f vg = __builtin_shufflevector(rg01, rg23, 2, 3, 6, 7) * mg + ag;
    const v4f vb = __builtin_shufflevector(b01, b23, 0, 1, 4, 5) * mb + ab;
    std::memcpy(r + j, &vr, sizeof vr);
    std::memcpy(g + j, &vg, sizeof vg);
    std::memcpy(b + j, &vb, sizeof vb);
  }
  for (; j < out_w; ++j) {
    const v4f acc = pixel<K>(row, ax, j);
    r[j] = acc[0] * af.mul[0] + af.add[0];
    g[j] = acc[1] * af.mul[1] + af.add[1];
    b[j] = acc[2] * af.mul[2] + af.add[2];
  }
}

TANDEM_RESAMPLE_CLONES void horizontal(const float* __restrict row, const AxisTable& ax,
                                       int64_t out_w, const ChannelAffine& af, float* __restrict r,
                                       float* __restrict g, float* __restrict b) {
  switch (ax.kmax) {  // the common tap counts: shrinking by up to 3.5x
    case 2:
      return horizontal_k<2>(row, ax, out_w, af, r, g, b);
    case 3:
      return horizontal_k<3>(row, ax, out_w, af, r, g, b);
    case 4:
      return horizontal_k<4>(row, ax, out_w, af, r, g, b);
    case 5:
      return horizontal_k<5>(row, ax, out_w, af, r, g, b);
    case 6:
      return horizontal_k<6>(row, ax, out_w, af, r, g, b);
    case 7:
      return horizontal_k<7>(row, ax, out_w, af, r, g, b);
    case 8:
      return horizontal_k<8>(row, ax, out_w, af, r, g, b);
    default:
      return horizontal_k<0>(row, ax, out_w, af, r, g, b);
  }
}

}  // namespace

ChannelAffine normalize_affine(const std::array<float, 3>& mean, const std::array<float, 3>& std) {
  ChannelAffine a;
  for (int c = 0; c < 3; ++c) {
    a.mul[c] = static_cast<float>(1.0 / (255.0 * static_cast<double>(std[c])));
    a.add[c] = static_cast<float>(-static_cast<double>(mean[c]) / static_cast<double>(std[c]));
  }
  return a;
}

void resample_rgb_to_chw(const RgbView& src, const ResampleBox& box, int64_t out_h, int64_t out_w,
                         bool flip, const ChannelAffine& affine, float* out,
                         std::vector<float>& work) {
  TD_ASSERT(src.pixels != nullptr && src.width > 0 && src.height > 0 &&
            src.row_stride >= src.width * 3);
  TD_ASSERT(out_h > 0 && out_w > 0 && box.scale_x > 0.0 && box.scale_y > 0.0);
  AxisTable ax, ay;
  ax.kmax = axis_kmax(box.x0, box.scale_x, out_w, src.width);
  ay.kmax = axis_kmax(box.y0, box.scale_y, out_h, src.height);
  // Layout of `work`: x table, y table, then one f32 RGB row padded for the last taps.
  const int64_t row_len = (src.width + ax.kmax) * 3 + 4;
  const int64_t need = out_w * (ax.kmax + 2) + out_h * (ay.kmax + 2) + row_len;
  if (static_cast<int64_t>(work.size()) < need) work.resize(static_cast<size_t>(need));
  float* p = work.data();
  ax.start = p, ax.count = p + out_w, ax.w = p + 2 * out_w;
  p += out_w * (ax.kmax + 2);
  ay.start = p, ay.count = p + out_h, ay.w = p + 2 * out_h;
  p += out_h * (ay.kmax + 2);
  float* row = p;
  fill_axis(ax, box.x0, box.scale_x, out_w, src.width, flip);
  fill_axis(ay, box.y0, box.scale_y, out_h, src.height, false);
  // Only the columns some output reads; the rest of the row stays zero for padded taps.
  const int64_t span = (ax.hi - ax.lo) * 3;
  std::fill(row + span, row + row_len, 0.0f);
  const int64_t plane = out_h * out_w;
  for (int64_t i = 0; i < out_h; ++i) {
    const int64_t y = static_cast<int64_t>(ay.start[i]);
    const uint8_t* s = src.pixels + y * src.row_stride + ax.lo * 3;
    vertical(row, s, src.row_stride, static_cast<int64_t>(ay.count[i]), ay.w + i * ay.kmax, span);
    float* o = out + i * out_w;
    horizontal(row, ax, out_w, affine, o, o + plane, o + 2 * plane);
  }
}

}  // namespace tandem::data
