// Own kernels: fused causal self-attention, flash style (Dao et al. 2022) in its simplest
// tiled form: no [T, T] matrix is ever stored. The forward runs one warp per query with an
// online softmax over tiles of kTile keys held in shared memory, and keeps y and the row
// log-sum-exp. The backward recomputes the probabilities from lse: Di = sum dO * O first,
// then dQ with one warp per query over its keys and dK, dV with one warp per key over its
// queries (two passes over the pairs instead of atomics, so the sums have a fixed order).
// Lanes hold head dimensions d = lane + 32 r (D <= kMaxHeadDim = 128); dot products are
// warp butterfly sums. Formulas as src/backend/cpu/cpu_attention_impl.h.
#include "backend/cuda/cuda_elem.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_reduce.cuh"
#include "backend/cuda/cuda_transformer_kernels.h"

namespace tandem::cuda_kernels {
namespace {

constexpr int kWarps = 8;   // queries (or keys) per block
constexpr int kTile = 32;   // keys (or queries) per shared-memory tile
constexpr int kPerLane = static_cast<int>(kMaxHeadDim / 32);

struct Dims {
  int64_t b, t, c, h;
  __host__ __device__ int64_t d() const { return c / h; }
  __host__ __device__ int64_t tiles() const { return (t + kWarps - 1) / kWarps; }
};

// This warp's slice of a head vector: v[r] = src[d] * mul for d = lane + 32 r < D, else 0.
template <typename T>
__device__ void load_lanes(const T* src, int64_t d_len, float mul, bool active, float (&v)[kPerLane]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int64_t d = lane + 32 * r;
    v[r] = active && d < d_len ? load(src, d) * mul : 0.0f;
  }
}

template <typename T>
__device__ void store_lanes(T* dst, int64_t d_len, float mul, const float (&v)[kPerLane]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int64_t d = lane + 32 * r;
    if (d < d_len) store(dst, d, v[r] * mul);
  }
}

// This lane's element r of a shared-memory row (0 past D).
__device__ inline float lane_val(const float* row, int r, int64_t d_len) {
  const int64_t d = (threadIdx.x & 31) + 32 * r;
  return d < d_len ? row[d] : 0.0f;
}

__device__ inline void zero_lanes(float (&v)[kPerLane]) {
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) v[r] = 0.0f;
}

// sum over the warp of a . row (row in shared memory, kMaxHeadDim wide).
__device__ inline float dot_lanes(const float (&a)[kPerLane], const float* row, int64_t d_len) {
  const int lane = threadIdx.x & 31;
  float part = 0.0f;
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int64_t d = lane + 32 * r;
    if (d < d_len) part += a[r] * row[d];
  }
  return warp_allsum(part);
}

// rows [first, first + n) of the head's `part` (0 q, 1 k, 2 v) of one batch row into a
// shared tile [kTile][kMaxHeadDim], times mul.
template <typename T>
__device__ void load_tile(const T* base, int64_t stride, int64_t col, int64_t first, int64_t n, int64_t d_len,
                          float mul, float (*tile)[kMaxHeadDim]) {
  for (int64_t e = threadIdx.x; e < n * d_len; e += blockDim.x) {
    const int64_t r = e / d_len, d = e - r * d_len;
    tile[r][d] = load(base, (first + r) * stride + col + d) * mul;
  }
}

// Block `blk` of a grid-stride loop: batch row b and head h (bh = b H + h), a tile of kWarps
// rows (queries or keys) from `first`; this warp's row, whether it exists, the tile's last row.
struct WarpRow {
  int64_t bh, b, h, first, row, last;
  bool active;
  __device__ WarpRow(int64_t blk, const Dims& s) {
    const int64_t tiles = s.tiles();
    bh = blk / tiles;
    b = bh / s.h;
    h = bh - b * s.h;
    first = (blk - bh * tiles) * kWarps;
    row = first + (threadIdx.x >> 5);
    last = min(first + kWarps, s.t) - 1;
    active = row < s.t;
  }
};

// Keys and values [j0, j0 + n) of head h of one batch row (qkv [T, 3C]) into shared tiles.
template <typename T>
__device__ void load_kv(const T* base, const Dims& s, int64_t h, int64_t j0, int64_t n, float (*ks)[kMaxHeadDim],
                        float (*vs)[kMaxHeadDim]) {
  const int64_t D = s.d();
  load_tile(base, 3 * s.c, s.c + h * D, j0, n, D, 1.0f, ks);
  load_tile(base, 3 * s.c, 2 * s.c + h * D, j0, n, D, 1.0f, vs);
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32) attn_fwd_k(const T* qkv, T* y, float* lse, Dims s) {
  __shared__ float ks[kTile][kMaxHeadDim];
  __shared__ float vs[kTile][kMaxHeadDim];
  const int64_t D = s.d(), C3 = 3 * s.c;
  const float scale = 1.0f / sqrtf(static_cast<float>(D));
  for (int64_t blk = blockIdx.x; blk < s.b * s.h * s.tiles(); blk += gridDim.x) {
    const WarpRow w(blk, s);
    const int64_t bh = w.bh, b = w.b, h = w.h, i = w.row, last = w.last;
    const bool active = w.active;
    const T* base = qkv + b * s.t * C3;
    float q[kPerLane], o[kPerLane];
    load_lanes(base + i * C3 + h * D, D, scale, active, q);
    zero_lanes(o);
    float m = -INFINITY, l = 0.0f;
    for (int64_t j0 = 0; j0 <= last; j0 += kTile) {
      const int64_t nk = min(static_cast<int64_t>(kTile), last + 1 - j0);
      __syncthreads();  // the previous tile is consumed
      load_kv(base, s, h, j0, nk, ks, vs);
      __syncthreads();
      if (!active) continue;
      const int64_t jn = min(nk, i - j0 + 1);  // keys j0 .. i of this tile
      for (int64_t kk = 0; kk < jn; ++kk) {
        const float sc = dot_lanes(q, ks[kk], D);
        const float mn = fmaxf(m, sc);
        const float corr = expf(m - mn), p = expf(sc - mn);
        l = l * corr + p;
#pragma unroll
        for (int r = 0; r < kPerLane; ++r) o[r] = o[r] * corr + p * lane_val(vs[kk], r, D);
        m = mn;
      }
    }
    if (!active) continue;
    store_lanes(y + (b * s.t + i) * s.c + h * D, D, 1.0f / l, o);
    if ((threadIdx.x & 31) == 0) lse[bh * s.t + i] = m + logf(l);
  }
}

// di[(b H + h) T + t] = sum over d of dy * y (one warp per row).
template <typename T>
__global__ void attn_di_k(const T* dy, const T* y, float* di, Dims s) {
  const int lane = threadIdx.x & 31;
  const int64_t D = s.d(), rows = s.b * s.t * s.h;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t r = global_index() >> 5; r < rows; r += warps) {
    const int64_t h = r % s.h, bt = r / s.h, b = bt / s.t, t = bt - b * s.t;
    const int64_t at = bt * s.c + h * D;
    float part = 0.0f;
    for (int64_t d = lane; d < D; d += 32) part += load(dy, at + d) * load(y, at + d);
    part = warp_allsum(part);
    if (lane == 0) di[(b * s.h + h) * s.t + t] = part;
  }
}

// dQ: one warp per query i, over keys 0 .. i in tiles.
template <typename T>
__global__ void __launch_bounds__(kWarps * 32) attn_dq_k(const T* dy, const T* qkv, const float* lse, const float* di,
                                                          T* dqkv, Dims s) {
  __shared__ float ks[kTile][kMaxHeadDim];
  __shared__ float vs[kTile][kMaxHeadDim];
  const int64_t D = s.d(), C3 = 3 * s.c;
  const float scale = 1.0f / sqrtf(static_cast<float>(D));
  for (int64_t blk = blockIdx.x; blk < s.b * s.h * s.tiles(); blk += gridDim.x) {
    const WarpRow w(blk, s);
    const int64_t bh = w.bh, b = w.b, h = w.h, i = w.row, last = w.last;
    const bool active = w.active;
    const T* base = qkv + b * s.t * C3;
    float q[kPerLane], g[kPerLane], dq[kPerLane];
    load_lanes(base + i * C3 + h * D, D, scale, active, q);
    load_lanes(dy + (b * s.t + i) * s.c + h * D, D, 1.0f, active, g);
    zero_lanes(dq);
    const float li = active ? lse[bh * s.t + i] : 0.0f, dii = active ? di[bh * s.t + i] : 0.0f;
    for (int64_t j0 = 0; j0 <= last; j0 += kTile) {
      const int64_t nk = min(static_cast<int64_t>(kTile), last + 1 - j0);
      __syncthreads();
      load_kv(base, s, h, j0, nk, ks, vs);
      __syncthreads();
      if (!active) continue;
      const int64_t jn = min(nk, i - j0 + 1);
      for (int64_t kk = 0; kk < jn; ++kk) {
        const float p = expf(dot_lanes(q, ks[kk], D) - li);
        const float ds = p * (dot_lanes(g, vs[kk], D) - dii);
#pragma unroll
        for (int r = 0; r < kPerLane; ++r) dq[r] += ds * lane_val(ks[kk], r, D);
      }
    }
    if (active) store_lanes(dqkv + (b * s.t + i) * C3 + h * D, D, scale, dq);
  }
}

// dK, dV: one warp per key j, over queries j .. T-1 in tiles.
template <typename T>
__global__ void __launch_bounds__(kWarps * 32) attn_dkv_k(const T* dy, const T* qkv, const float* lse, const float* di,
                                                           T* dqkv, Dims s) {
  __shared__ float qs[kTile][kMaxHeadDim];
  __shared__ float gs[kTile][kMaxHeadDim];
  __shared__ float ls[kTile], ds_[kTile];
  const int64_t D = s.d(), C3 = 3 * s.c;
  const float scale = 1.0f / sqrtf(static_cast<float>(D));
  for (int64_t blk = blockIdx.x; blk < s.b * s.h * s.tiles(); blk += gridDim.x) {
    const WarpRow w(blk, s);
    const int64_t bh = w.bh, b = w.b, h = w.h, j = w.row, first = w.first;
    const bool active = w.active;
    const T* base = qkv + b * s.t * C3;
    float k[kPerLane], v[kPerLane], dk[kPerLane], dv[kPerLane];
    load_lanes(base + j * C3 + s.c + h * D, D, 1.0f, active, k);
    load_lanes(base + j * C3 + 2 * s.c + h * D, D, 1.0f, active, v);
    zero_lanes(dk);
    zero_lanes(dv);
    for (int64_t i0 = first; i0 < s.t; i0 += kTile) {
      const int64_t nq = min(static_cast<int64_t>(kTile), s.t - i0);
      __syncthreads();
      load_tile(base, C3, h * D, i0, nq, D, scale, qs);
      load_tile(dy + b * s.t * s.c, s.c, h * D, i0, nq, D, 1.0f, gs);
      for (int64_t e = threadIdx.x; e < nq; e += blockDim.x) {
        ls[e] = lse[bh * s.t + i0 + e];
        ds_[e] = di[bh * s.t + i0 + e];
      }
      __syncthreads();
      if (!active) continue;
      for (int64_t kk = j > i0 ? j - i0 : 0; kk < nq; ++kk) {
        const float p = expf(dot_lanes(k, qs[kk], D) - ls[kk]);
        const float ds = p * (dot_lanes(v, gs[kk], D) - ds_[kk]);
#pragma unroll
        for (int r = 0; r < kPerLane; ++r) {
          dv[r] += p * lane_val(gs[kk], r, D);
          dk[r] += ds * lane_val(qs[kk], r, D);
        }
      }
    }
    if (!active) continue;
    T* out = dqkv + (b * s.t + j) * C3;
    store_lanes(out + s.c + h * D, D, 1.0f, dk);
    store_lanes(out + 2 * s.c + h * D, D, 1.0f, dv);
  }
}

unsigned grid_of(const Dims& s) {
  const int64_t blocks = s.b * s.h * s.tiles();
  return static_cast<unsigned>(blocks < (1 << 20) ? (blocks > 0 ? blocks : 1) : (1 << 20));
}

}  // namespace

cudaError_t attention_forward(Elem e, const void* qkv, void* y, float* lse, int64_t batch, int64_t seq, int64_t c,
                              int64_t heads, cudaStream_t s) {
  const Dims d{batch, seq, c, heads};
  if (batch * seq * c <= 0) return cudaGetLastError();
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    attn_fwd_k<<<grid_of(d), kWarps * 32, 0, s>>>(static_cast<const T*>(qkv), static_cast<T*>(y), lse, d);
    return cudaGetLastError();
  });
}

size_t attention_backward_scratch(int64_t batch, int64_t seq, int64_t heads) {
  return static_cast<size_t>(batch * seq * heads > 0 ? batch * seq * heads : 1) * sizeof(float);
}

cudaError_t attention_backward(Elem e, const void* dy, const void* qkv, const void* y, const float* lse, void* dqkv,
                               int64_t batch, int64_t seq, int64_t c, int64_t heads, void* scratch, cudaStream_t s) {
  const Dims d{batch, seq, c, heads};
  if (batch * seq * c <= 0) return cudaGetLastError();
  auto* di = static_cast<float*>(scratch);
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    const T* g = static_cast<const T*>(dy);
    const T* x = static_cast<const T*>(qkv);
    attn_di_k<<<blocks_for(batch * seq * heads * 32), kThreads, 0, s>>>(g, static_cast<const T*>(y), di, d);
    attn_dq_k<<<grid_of(d), kWarps * 32, 0, s>>>(g, x, lse, di, static_cast<T*>(dqkv), d);
    attn_dkv_k<<<grid_of(d), kWarps * 32, 0, s>>>(g, x, lse, di, static_cast<T*>(dqkv), d);
    return cudaGetLastError();
  });
}

}  // namespace tandem::cuda_kernels
