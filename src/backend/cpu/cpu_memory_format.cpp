// Memory formats on the cpu backend: the preferred activation layout and the NCHW <-> NHWC
// copy between the two dense formats (a blocked transpose of each image's [C, H*W] matrix).
#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_loops.h"

namespace tandem::ops {
namespace {

// dst[j * rows + i] = src[i * cols + j] for an image's rows x cols matrix, in 32 x 32 tiles.
template <typename T>
void transpose(const T* src, T* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile)
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(cols, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) dst[j * rows + i] = src[i * cols + j];
    }
}

template <typename T>
void convert(const Tensor& src, const Tensor& dst) {
  const T* s = static_cast<const T*>(src.raw_data());
  T* d = static_cast<T*>(dst.raw_data());
  if (src.memory_format() == dst.memory_format()) {
    std::memcpy(d, s, src.nbytes());
    return;
  }
  const int64_t n = src.size(0), c = src.size(1), hw = src.size(2) * src.size(3);
  // NCHW -> NHWC transposes each image's [C, HW]; NHWC -> NCHW its [HW, C].
  const bool to_nhwc = dst.memory_format() == MemoryFormat::channels_last;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T* si = s + i * c * hw;
    T* di = d + i * c * hw;
    if (to_nhwc) transpose(si, di, c, hw);
    else transpose(si, di, hw, c);
  }
}

}  // namespace

MemoryFormat CpuBackend::preferred_memory_format(DType) const { return MemoryFormat::channels_last; }

void CpuBackend::convert_memory_format(const Tensor& src, const Tensor& dst) {
  switch (dtype_size(src.dtype())) {
    case 1: return convert<uint8_t>(src, dst);
    case 2: return convert<uint16_t>(src, dst);
    case 4: return convert<uint32_t>(src, dst);
    default: return convert<uint64_t>(src, dst);
  }
}

}  // namespace tandem::ops
