#include "tandem/nn/generate/cached_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tandem/error.h"

namespace tandem::nn {
namespace {

void check_f32_2d(const Tensor& t, const char* name, int64_t rows, int64_t cols) {
  TD_CHECK_ARG(t.defined() && t.dtype() == DType::f32 && t.device().is_host() &&
                   t.is_contiguous() && t.dim() == 2,
               "cached_attention", "{} must be a contiguous f32 host tensor [{}, {}], found {}",
               name, rows < 0 ? std::string("P") : std::to_string(rows), cols,
               t.defined() ? fmt::format("{} {}", dtype_name(t.dtype()), shape_str(t.shape()))
                           : "undefined");
  TD_CHECK_ARG((rows < 0 || t.size(0) == rows) && t.size(1) == cols, "cached_attention",
               "{} must be [{}, {}], found {}", name,
               rows < 0 ? std::string("P") : std::to_string(rows), cols, shape_str(t.shape()));
}

// One query row against keys 0 .. last of one head: y = softmax(q k^T * scale) v.
void attend(const float* q, const float* k, const float* v, int64_t stride, int64_t last, int64_t d,
            float scale, float* scores, float* y) {
  float mx = -INFINITY;
  for (int64_t j = 0; j <= last; ++j) {
    const float* kj = k + j * stride;
    float s = 0.0f;
    for (int64_t e = 0; e < d; ++e) s += q[e] * kj[e];
    scores[j] = s * scale;
    mx = std::max(mx, scores[j]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j <= last; ++j) sum += (scores[j] = std::exp(scores[j] - mx));
  const float inv = 1.0f / sum;
  std::fill(y, y + d, 0.0f);
  for (int64_t j = 0; j <= last; ++j) {
    const float w = scores[j] * inv;
    const float* vj = v + j * stride;
    for (int64_t e = 0; e < d; ++e) y[e] += w * vj[e];
  }
}

}  // namespace

void cached_attention(const Tensor& qkv, int64_t p0, int64_t n_head, const Tensor& k_cache,
                      const Tensor& v_cache, const Tensor& y) {
  TD_CHECK_ARG(qkv.defined() && qkv.dim() == 2 && qkv.size(1) % 3 == 0, "cached_attention",
               "qkv must be [n, 3C], found {}",
               qkv.defined() ? shape_str(qkv.shape()) : "undefined");
  const int64_t n = qkv.size(0), c = qkv.size(1) / 3;
  check_f32_2d(qkv, "qkv", n, 3 * c);
  check_f32_2d(k_cache, "k_cache", -1, c);
  check_f32_2d(v_cache, "v_cache", k_cache.size(0), c);
  check_f32_2d(y, "y", n, c);
  TD_CHECK_ARG(n_head >= 1 && c % n_head == 0, "cached_attention",
               "n_head {} must be >= 1 and divide C {}", n_head, c);
  const int64_t cap = k_cache.size(0);
  TD_CHECK_ARG(p0 >= 0 && p0 + n <= cap, "cached_attention",
               "positions {} .. {} do not fit a cache of {} positions", p0, p0 + n - 1, cap);
  const float* src = qkv.data<float>();
  float* kc = k_cache.data<float>();
  float* vc = v_cache.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(kc + (p0 + i) * c, src + i * 3 * c + c, static_cast<size_t>(c) * sizeof(float));
    std::memcpy(vc + (p0 + i) * c, src + i * 3 * c + 2 * c, static_cast<size_t>(c) * sizeof(float));
  }
  const int64_t d = c / n_head;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  float* out = y.data<float>();
  const int64_t rows = n * n_head;
  // Threads only where the work pays for waking them: about 2 * rows * positions * D flops.
  const bool parallel = rows > 1 && rows * (p0 + n) * d >= (1 << 16);
#pragma omp parallel if (parallel)
  {
    std::vector<float> scores(static_cast<size_t>(p0 + n));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r / n_head, h = r % n_head;
      attend(src + i * 3 * c + h * d, kc + h * d, vc + h * d, c, p0 + i, d, scale, scores.data(),
             out + i * c + h * d);
    }
  }
}

}  // namespace tandem::nn
