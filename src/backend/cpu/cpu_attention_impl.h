// Causal self-attention kernels (cpu_transformer_kernels.h), included by the two
// instruction-set units after their target pragma; internal linkage.
//
// Per (batch, head), on one thread: the head's q, k, v columns of qkv [B, T, 3C] (head h at
// columns h*D, C + h*D, 2C + h*D) are gathered into f32 [T, D] tiles; then for each block of
// kBlockQ queries [i0, i1) the scores S = q k^T / sqrt(D) against keys [0, i1) (oneDNN
// sgemm, single-threaded inside the parallel region), the causal softmax per row and O = P v.
// Only y [B, T, C] and the row log-sum-exp lse [B, H, T] (natural log, of the scaled scores)
// are kept: no [T, T] matrix outlives its block (flash attention: Dao et al. 2022; the
// backward recomputes P = exp(S - lse) block by block, with Di = sum_d dO * O):
//   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - Di),  dQ = dS K / sqrt(D),  dK += dS^T Q / sqrt(D).
// Each head's work and its order are fixed, so results do not depend on the thread count.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/cpu_scratch.h"
#include "backend/cpu/cpu_transformer_kernels.h"
#include "backend/cpu/cpu_vec_math.h"
#include "tandem/error.h"

namespace tandem::ops::cpu {
namespace {

constexpr int64_t kBlockQ = 64;

// Row-major C [m, n] = alpha op(A) op(B) + beta C (oneDNN sgemm). Called inside parallel
// regions, where nothing may throw: a failure is recorded in `failed` (reported after the
// region by attn_check).
void attn_gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc, int& failed) {
  const dnnl::status s = dnnl::sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (s != dnnl::status::success) {
#pragma omp atomic write
    failed = static_cast<int>(s);
  }
}

constexpr int kNoScratch = -1;  // `failed` when a thread's scratch could not be allocated

void attn_check(int failed, const char* op) {
  TD_CHECK(failed != kNoScratch, ErrorCode::out_of_memory, op, "cannot allocate the per-thread head tiles");
  TD_CHECK(failed == 0, ErrorCode::internal, op, "oneDNN sgemm failed with status {}", failed);
}

// dst [T, D] f32 = the D columns from `col` of the rows of src (row stride `ld`).
template <typename T>
void gather_head(const T* src, int64_t stride, int64_t col, int64_t t_len, int64_t d, float* dst) {
  for (int64_t t = 0; t < t_len; ++t) {
    const T* s = src + t * stride + col;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) dst[t * d + j] = ld(s[j]);
  }
}

template <typename T>
void scatter_head(const float* src, int64_t t_len, int64_t d, T* dst, int64_t stride, int64_t col) {
  for (int64_t t = 0; t < t_len; ++t) {
    T* o = dst + t * stride + col;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) o[j] = st(src[t * d + j], o);
  }
}

// One thread's f32 tiles of a head: q, k, v [T, D] (scratch slots 0-2) and one block of
// scores [kBlockQ, T] (slot 3). `ok` is false when the scratch could not be allocated, which
// is recorded in `failed` (nothing may throw inside the parallel region).
struct HeadTiles {
  float* q;
  float* k;
  float* v;
  float* s;
  bool ok;
  HeadTiles(int64_t t_len, int64_t d, int& failed)
      : q(scratch_f32(0, t_len * d)),
        k(scratch_f32(1, t_len * d)),
        v(scratch_f32(2, t_len * d)),
        s(scratch_f32(3, kBlockQ * t_len)),
        ok(q && k && v && s) {
    note(ok, failed);
  }
  static void note(bool fine, int& failed) {
    if (!fine) {
#pragma omp atomic write
      failed = kNoScratch;
    }
  }
  /// Gathers head h of batch row `base` (qkv [T, 3C]).
  template <typename T>
  void gather(const T* base, int64_t c, int64_t h, int64_t t_len, int64_t d) {
    gather_head(base, 3 * c, h * d, t_len, d, q);
    gather_head(base, 3 * c, c + h * d, t_len, d, k);
    gather_head(base, 3 * c, 2 * c + h * d, t_len, d, v);
  }
};

template <typename T>
void attn_forward(const AttentionArgs& a) {
  const int64_t B = a.batch, T_ = a.seq, C = a.channels, H = a.heads, D = C / H, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const T* qkv = static_cast<const T*>(a.qkv);
  T* y = static_cast<T*>(a.y);
  int failed = 0;
#pragma omp parallel
  {
    HeadTiles tiles(T_, D, failed);
    float *q = tiles.q, *k = tiles.k, *v = tiles.v, *s = tiles.s;
    float* o = scratch_f32(4, kBlockQ * D);
    const bool ok = tiles.ok && o;
    HeadTiles::note(ok, failed);
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < B * H; ++bh) {
      if (!ok) continue;
      const int64_t b = bh / H, h = bh % H;
      tiles.gather(qkv + b * T_ * C3, C, h, T_, D);
      for (int64_t i0 = 0; i0 < T_; i0 += kBlockQ) {
        const int64_t i1 = std::min(T_, i0 + kBlockQ), m = i1 - i0, kend = i1;
        attn_gemm('N', 'T', m, kend, D, scale, q + i0 * D, D, k, D, 0.0f, s, kend, failed);
        for (int64_t r = 0; r < m; ++r) {
          const int64_t i = i0 + r;
          float* row = s + r * kend;
          float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
          for (int64_t j = 0; j <= i; ++j) mx = row[j] > mx ? row[j] : mx;
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int64_t j = 0; j <= i; ++j) {
            const float e = vexp(row[j] - mx);
            row[j] = e;
            sum += e;
          }
          const float inv = 1.0f / sum;
#pragma omp simd
          for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
          for (int64_t j = i + 1; j < kend; ++j) row[j] = 0.0f;
          a.lse[bh * T_ + i] = mx + std::log(sum);
        }
        attn_gemm('N', 'N', m, D, kend, 1.0f, s, kend, v, D, 0.0f, o, D, failed);
        scatter_head(o, m, D, y + (b * T_ + i0) * C, C, h * D);
      }
    }
  }
  attn_check(failed, "attention_forward");
}

template <typename T>
void attn_backward(const AttentionArgs& a) {
  const int64_t B = a.batch, T_ = a.seq, C = a.channels, H = a.heads, D = C / H, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const T* qkv = static_cast<const T*>(a.qkv);
  const T* y = static_cast<const T*>(a.y);
  const T* dy = static_cast<const T*>(a.dy);
  T* dqkv = static_cast<T*>(a.dqkv);
  int failed = 0;
#pragma omp parallel
  {
    HeadTiles tiles(T_, D, failed);
    float *q = tiles.q, *k = tiles.k, *v = tiles.v, *s = tiles.s;
    float* dp = scratch_f32(4, kBlockQ * T_);
    float* dout = scratch_f32(5, T_ * D);
    float* grads = scratch_f32(6, 3 * T_ * D + T_);  // dq, dk, dv [T, D], then Di [T]
    const bool ok = tiles.ok && dp && dout && grads;
    HeadTiles::note(ok, failed);
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < B * H; ++bh) {
      if (!ok) continue;
      const int64_t b = bh / H, h = bh % H;
      tiles.gather(qkv + b * T_ * C3, C, h, T_, D);
      gather_head(dy + b * T_ * C, C, h * D, T_, D, dout);
      float* dq = grads;
      float* dk = grads + T_ * D;
      float* dv = grads + 2 * T_ * D;
      float* di = grads + 3 * T_ * D;
      for (int64_t j = 0; j < 2 * T_ * D; ++j) dk[j] = 0.0f;  // dk and dv
      for (int64_t t = 0; t < T_; ++t) {
        const T* yo = y + (b * T_ + t) * C + h * D;
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int64_t j = 0; j < D; ++j) acc += dout[t * D + j] * ld(yo[j]);
        di[t] = acc;
      }
      for (int64_t i0 = 0; i0 < T_; i0 += kBlockQ) {
        const int64_t i1 = std::min(T_, i0 + kBlockQ), m = i1 - i0, kend = i1;
        attn_gemm('N', 'T', m, kend, D, scale, q + i0 * D, D, k, D, 0.0f, s, kend, failed);
        for (int64_t r = 0; r < m; ++r) {
          const int64_t i = i0 + r;
          float* row = s + r * kend;
          const float l = a.lse[bh * T_ + i];
#pragma omp simd
          for (int64_t j = 0; j <= i; ++j) row[j] = vexp(row[j] - l);
          for (int64_t j = i + 1; j < kend; ++j) row[j] = 0.0f;
        }
        attn_gemm('T', 'N', kend, D, m, 1.0f, s, kend, dout + i0 * D, D, 1.0f, dv, D, failed);
        attn_gemm('N', 'T', m, kend, D, 1.0f, dout + i0 * D, D, v, D, 0.0f, dp, kend, failed);
        for (int64_t r = 0; r < m; ++r) {
          const int64_t i = i0 + r;
          const float* p = s + r * kend;
          float* g = dp + r * kend;
          const float dii = di[i];
#pragma omp simd
          for (int64_t j = 0; j < kend; ++j) g[j] = p[j] * (g[j] - dii);
        }
        attn_gemm('N', 'N', m, D, kend, scale, dp, kend, k, D, 0.0f, dq + i0 * D, D, failed);
        attn_gemm('T', 'N', kend, D, m, scale, dp, kend, q + i0 * D, D, 1.0f, dk, D, failed);
      }
      T* out = dqkv + b * T_ * C3;
      scatter_head(dq, T_, D, out, C3, h * D);
      scatter_head(dk, T_, D, out, C3, C + h * D);
      scatter_head(dv, T_, D, out, C3, 2 * C + h * D);
    }
  }
  attn_check(failed, "attention_backward");
}

void attention_forward_k(const AttentionArgs& a) {
  by_dtype(a.dt, [&](auto t) { attn_forward<decltype(t)>(a); });
}
void attention_backward_k(const AttentionArgs& a) {
  by_dtype(a.dt, [&](auto t) { attn_backward<decltype(t)>(a); });
}

}  // namespace
}  // namespace tandem::ops::cpu
