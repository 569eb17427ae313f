// Portable kernels: the reference every SIMD level must match bit for bit.
#include "backend/cpu/cpu_optim_element.h"

namespace tandem::ops::detail {

void adam_range_scalar(const AdamArgs& a, int64_t begin, int64_t end) {
  if (a.exp_avg16) {
    for (int64_t i = begin; i < end; ++i) adam_element_bf16m(a, i);
    return;
  }
  for (int64_t i = begin; i < end; ++i) adam_element(a, i);
}

void sgd_range_scalar(const SgdArgs& a, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) sgd_element(a, i);
}

void widen_range_scalar(const WidenArgs& a, int64_t begin, int64_t end) {
  if (a.src_dtype == DType::bf16) {
    for (int64_t i = begin; i < end; ++i) a.dst[i] = bf16_to_float(a.src[i]);
  } else {
    for (int64_t i = begin; i < end; ++i) a.dst[i] = f16_to_float(a.src[i]);
  }
}

void narrow_range_scalar(const NarrowArgs& a, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) store_out(a.dst, a.dst_dtype, i, a.src[i]);
}

}  // namespace tandem::ops::detail
