// The fused classifier's softmax rows (cpu_transformer_kernels.h), included by the two
// instruction-set units after their target pragma; internal linkage.
// Per row z [V] of logits (f32, in place), with t the row's target:
//   m = max z, s = sum exp(z - m), lse = m + log s, loss = lse - z[t],
//   gradient (softmax(z) - onehot(t)) * scale, written over z (llm.c's fused classifier).
// The exponentials are stored in place on the first pass and scaled on the second, so each
// logit is exponentiated once.
#pragma once

#include <cmath>

#include "backend/cpu/cpu_transformer_kernels.h"
#include "backend/cpu/cpu_vec_math.h"

namespace tandem::ops::cpu {
namespace {

void xent_rows_k(const XentRowsArgs& a) {
  const int64_t v = a.vocab;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < a.rows; ++r) {
    float* z = a.logits + r * v;
    const int64_t t = a.targets[r];
    const bool valid = t >= 0 && t < v;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < v; ++j) mx = z[j] > mx ? z[j] : mx;
    int64_t first = v;  // the first index holding the maximum
    for (int64_t j = 0; j < v; ++j)
      if (z[j] == mx) {
        first = j;
        break;
      }
    const float zt = valid ? z[t] : 0.0f;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < v; ++j) {
      const float e = vexp(z[j] - mx);
      z[j] = e;
      sum += e;
    }
    const double lse = static_cast<double>(mx) + std::log(static_cast<double>(sum));
    a.row_loss[r] = valid ? lse - static_cast<double>(zt) : 0.0;
    a.row_correct[r] = valid && first == t ? 1 : 0;
    if (!a.grad) continue;
    if (valid) {
      const float k = a.scale / sum;
#pragma omp simd
      for (int64_t j = 0; j < v; ++j) z[j] *= k;
      z[t] -= a.scale;
    } else {
      for (int64_t j = 0; j < v; ++j) z[j] = 0.0f;
    }
    if (a.grad_bf16) {
      uint16_t* g = a.grad_bf16 + r * v;
#pragma omp simd
      for (int64_t j = 0; j < v; ++j) g[j] = float_to_bf16(z[j]);
    }
  }
}

}  // namespace
}  // namespace tandem::ops::cpu
