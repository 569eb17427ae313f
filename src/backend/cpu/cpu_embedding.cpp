// Token + position embedding on the cpu. Forward: rows of B*T in parallel, each the sum of
// one wte row and one wpe row. Backward: a deterministic scatter-add. The positions are
// grouped by token id with a stable counting sort (ids in [0, V), positions ascending within
// an id); then each id present is one task that adds its rows of dy into dwte[id] in position
// order, and each position t one task that adds dy[b, t] over b in order, so every sum has
// a fixed order whatever the number of threads (bit-identical for 1, 2, 3, ... threads).
#include <cstring>
#include <vector>
#include "backend/cpu/cpu_backend.h"

#include "backend/cpu/cpu_loops.h"
#include "tandem/error.h"

namespace tandem::ops::cpu {
namespace {

// tokens [B, T] (i32 or i64) as int64, checked against [0, V).
std::vector<int64_t> token_ids(const Tensor& tokens, int64_t vocab, const char* op) {
  const int64_t n = tokens.numel(), t_len = tokens.size(1);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  if (tokens.dtype() == DType::i32) {
    const int32_t* p = tokens.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) ids[i] = p[i];
  } else {
    std::memcpy(ids.data(), tokens.data<int64_t>(), static_cast<size_t>(n) * sizeof(int64_t));
  }
  for (int64_t i = 0; i < n; ++i)
    TD_CHECK_ARG(ids[i] >= 0 && ids[i] < vocab, op, "token {} at [{}, {}] is outside [0, {})", ids[i], i / t_len,
                 i % t_len, vocab);
  return ids;
}

template <typename T>
void forward(const std::vector<int64_t>& ids, const Tensor& wte, const Tensor& wpe, const Tensor& y, int64_t t_len) {
  const int64_t n = static_cast<int64_t>(ids.size()), c = wte.size(1);
  const T* te = elems<T>(wte);
  const T* pe = wpe.defined() ? elems<T>(wpe) : nullptr;
  T* out = elems<T>(y);
#pragma omp parallel for schedule(static) if (n * c > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T* a = te + ids[i] * c;
    T* o = out + i * c;
    if (pe) {
      const T* b = pe + (i % t_len) * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) o[j] = st(ld(a[j]) + ld(b[j]), o);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) o[j] = a[j];
    }
  }
}

template <typename T>
void backward_tokens(const std::vector<int64_t>& ids, const T* dy, float* dwte, int64_t vocab, int64_t c) {
  const int64_t n = static_cast<int64_t>(ids.size());
  // Stable counting sort of positions by id.
  std::vector<int64_t> start(static_cast<size_t>(vocab + 1), 0);
  for (int64_t i = 0; i < n; ++i) ++start[ids[i] + 1];
  for (int64_t v = 0; v < vocab; ++v) start[v + 1] += start[v];
  std::vector<int64_t> order(static_cast<size_t>(n)), fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[fill[ids[i]]++] = i;
  std::vector<int64_t> present;
  for (int64_t v = 0; v < vocab; ++v)
    if (start[v + 1] > start[v]) present.push_back(v);
  const int64_t np = static_cast<int64_t>(present.size());
#pragma omp parallel for schedule(dynamic, 16) if (n * c > kParallelMin)
  for (int64_t u = 0; u < np; ++u) {
    const int64_t v = present[u];
    float* row = dwte + v * c;
    for (int64_t k = start[v]; k < start[v + 1]; ++k) {
      const T* g = dy + order[k] * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) row[j] += ld(g[j]);
    }
  }
}

template <typename T>
void backward_positions(const T* dy, float* dwpe, int64_t batch, int64_t t_len, int64_t c) {
#pragma omp parallel for schedule(static) if (batch * t_len * c > kParallelMin)
  for (int64_t t = 0; t < t_len; ++t) {
    float* row = dwpe + t * c;
    for (int64_t b = 0; b < batch; ++b) {
      const T* g = dy + (b * t_len + t) * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) row[j] += ld(g[j]);
    }
  }
}

}  // namespace

}  // namespace tandem::ops::cpu

// The cpu backend's ops (tandem/transformer_ops.h; arguments checked by the front end).
namespace tandem::ops {

void CpuBackend::embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& y) {
  const std::vector<int64_t> ids = cpu::token_ids(tokens, wte.size(0), "embedding_forward");
  cpu::by_dtype(wte.dtype(), [&](auto t) { cpu::forward<decltype(t)>(ids, wte, wpe, y, tokens.size(1)); });
}

void CpuBackend::embedding_backward(const Tensor& dy, const Tensor& tokens, const Tensor& dwte, const Tensor& dwpe,
                                    bool accumulate) {
  const int64_t batch = tokens.size(0), t_len = tokens.size(1), c = dy.size(-1);
  const std::vector<int64_t> ids =
      dwte.defined() ? cpu::token_ids(tokens, dwte.size(0), "embedding_backward") : std::vector<int64_t>();
  if (!accumulate) {
    if (dwte.defined()) cpu::zero(dwte.data<float>(), dwte.numel());
    if (dwpe.defined()) cpu::zero(dwpe.data<float>(), dwpe.numel());
  }
  cpu::by_dtype(dy.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* g = cpu::elems<T>(dy);
    if (dwte.defined()) cpu::backward_tokens(ids, g, dwte.data<float>(), dwte.size(0), c);
    if (dwpe.defined()) cpu::backward_positions(g, dwpe.data<float>(), batch, t_len, c);
  });
}

}  // namespace tandem::ops
