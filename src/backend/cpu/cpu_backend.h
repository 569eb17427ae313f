// The cpu backend: oneDNN for convolution, inner products (sgemm) and batch norm; vectorised
// OpenMP loops for pooling, element-wise ops and the loss. Methods are defined in the
// cpu_<op>.cpp files beside this header.
#pragma once

#include "tandem/backend.h"

namespace tandem::ops {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  /// The cpu table (cpu_support.cpp). It answers for the cpu backend as cpu_backend() returns
  /// it: bf16 kernels here only where cpu::native_bf16(), f16 never; the storage wrapper
  /// (cpu_f16.h) runs the rest of the table's 16-bit entries through f32.
  const OpSupport& op_support() const override;
  /// Convolutions, batch norm, pooling and the element-wise ops take channels_last.
  bool supports_channels_last() const override { return true; }
  /// channels_last for every dtype (cpu_memory_format.cpp).
  MemoryFormat preferred_memory_format(DType dtype) const override;
  void convert_memory_format(const Tensor& src, const Tensor& dst) override;

  /// Every op of tandem/op_list.h, defined in the cpu_<op>.cpp files.
  TANDEM_OPS(TANDEM_OP_DECLARE_OVERRIDE)
};

}  // namespace tandem::ops
