// Own kernels: token + position embedding. The forward is a grid-stride gather. The backward is
// deterministic (as the cpu's, src/backend/cpu/cpu_embedding.cpp): CUB's radix sort (stable)
// orders the positions by token id, then one block per run of equal ids sums its dy rows in
// position order and adds the sum to dwte[id]; dwpe sums over the batch in order. No
// floating-point atomics, so the bits do not depend on scheduling.
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/cuda_elem.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_reduce.cuh"
#include "backend/cuda/cuda_transformer_kernels.h"

namespace tandem::cuda_kernels {
namespace {

template <typename T>
__global__ void emb_fwd_k(const void* ids, bool i64, const T* wte, const T* wpe, T* y, int64_t n, int64_t seq,
                          int64_t vocab, int64_t c) {
  const int64_t total = n * c;
  for (int64_t k = global_index(); k < total; k += global_stride()) {
    const int64_t i = k / c, j = k - i * c;
    const int64_t id = load_id(ids, i64, i);
    float v = 0.0f;
    if (id >= 0 && id < vocab) v = load(wte, id * c + j) + (wpe ? load(wpe, (i % seq) * c + j) : 0.0f);
    store(y, k, v);
  }
}

// keys[i] = id (vocab for an id outside [0, vocab): sorted last and skipped), vals[i] = i.
__global__ void emb_keys_k(const void* ids, bool i64, int32_t* keys, int32_t* vals, int64_t n, int64_t vocab) {
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const int64_t id = load_id(ids, i64, i);
    keys[i] = static_cast<int32_t>(id >= 0 && id < vocab ? id : vocab);
    vals[i] = static_cast<int32_t>(i);
  }
}

// One block per run of equal sorted ids (the block at the run's first position).
template <typename T>
__global__ void emb_runs_k(const T* dy, const int32_t* keys, const int32_t* pos, float* dwte, int64_t n,
                           int64_t vocab, int64_t c) {
  for (int64_t p = blockIdx.x; p < n; p += gridDim.x) {
    const int32_t key = keys[p];
    if (key >= vocab || (p > 0 && keys[p - 1] == key)) continue;
    int64_t end = p + 1;
    while (end < n && keys[end] == key) ++end;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      float acc = 0.0f;
      for (int64_t q = p; q < end; ++q) acc += load(dy, static_cast<int64_t>(pos[q]) * c + j);
      dwte[key * c + j] += acc;
    }
  }
}

template <typename T>
__global__ void emb_pos_k(const T* dy, float* dwpe, int64_t batch, int64_t seq, int64_t c) {
  const int64_t total = seq * c;
  for (int64_t k = global_index(); k < total; k += global_stride()) {
    const int64_t t = k / c, j = k - t * c;
    float acc = 0.0f;
    for (int64_t b = 0; b < batch; ++b) acc += load(dy, (b * seq + t) * c + j);
    dwpe[k] += acc;
  }
}

int key_bits(int64_t vocab) {
  int bits = 1;
  while ((int64_t{1} << bits) <= vocab) ++bits;  // vocab itself (the sentinel) must fit
  return bits;
}

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

size_t sort_temp_bytes(int64_t n, int64_t vocab) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                  static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                  static_cast<int>(n), 0, key_bits(vocab));
  return bytes;
}

}  // namespace

cudaError_t embedding_forward(Elem e, const void* ids, bool ids_i64, const void* wte, const void* wpe, void* y,
                              int64_t batch, int64_t seq, int64_t vocab, int64_t c, cudaStream_t s) {
  const int64_t n = batch * seq;
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n * c > 0)
      emb_fwd_k<<<blocks_for(n * c), kThreads, 0, s>>>(ids, ids_i64, static_cast<const T*>(wte),
                                                       static_cast<const T*>(wpe), static_cast<T*>(y), n, seq, vocab, c);
    return cudaGetLastError();
  });
}

size_t embedding_backward_scratch(int64_t n, int64_t vocab) {
  return 4 * align256(static_cast<size_t>(n > 0 ? n : 1) * sizeof(int32_t)) + align256(sort_temp_bytes(n, vocab));
}

cudaError_t embedding_backward(Elem e, const void* dy, const void* ids, bool ids_i64, float* dwte, float* dwpe,
                               int64_t batch, int64_t seq, int64_t vocab, int64_t pos_rows, int64_t c,
                               bool accumulate, void* scratch, size_t scratch_bytes, cudaStream_t s) {
  const int64_t n = batch * seq;
  if (!accumulate) {
    if (dwte) {
      const cudaError_t err = cudaMemsetAsync(dwte, 0, static_cast<size_t>(vocab * c) * sizeof(float), s);
      if (err != cudaSuccess) return err;
    }
    if (dwpe) {
      const cudaError_t err = cudaMemsetAsync(dwpe, 0, static_cast<size_t>(pos_rows * c) * sizeof(float), s);
      if (err != cudaSuccess) return err;
    }
  }
  if (n * c <= 0) return cudaGetLastError();
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    const T* g = static_cast<const T*>(dy);
    if (dwte) {
      const size_t slab = align256(static_cast<size_t>(n) * sizeof(int32_t));
      auto* base = static_cast<char*>(scratch);
      auto* keys_in = reinterpret_cast<int32_t*>(base);
      auto* keys_out = reinterpret_cast<int32_t*>(base + slab);
      auto* vals_in = reinterpret_cast<int32_t*>(base + 2 * slab);
      auto* vals_out = reinterpret_cast<int32_t*>(base + 3 * slab);
      size_t temp = scratch_bytes - 4 * slab;
      emb_keys_k<<<blocks_for(n), kThreads, 0, s>>>(ids, ids_i64, keys_in, vals_in, n, vocab);
      const cudaError_t err = cub::DeviceRadixSort::SortPairs(base + 4 * slab, temp, keys_in, keys_out, vals_in,
                                                              vals_out, static_cast<int>(n), 0, key_bits(vocab), s);
      if (err != cudaSuccess) return err;
      const unsigned grid = static_cast<unsigned>(n < 65536 ? n : 65536);
      emb_runs_k<<<grid, kThreads, 0, s>>>(g, keys_out, vals_out, dwte, n, vocab, c);
    }
    if (dwpe) emb_pos_k<<<blocks_for(seq * c), kThreads, 0, s>>>(g, dwpe, batch, seq, c);
    return cudaGetLastError();
  });
}

}  // namespace tandem::cuda_kernels
