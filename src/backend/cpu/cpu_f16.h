// 16-bit dtypes the cpu cannot compute in: storage, not compute. oneDNN 2.6 has no f16
// convolution or matrix product on the CPU (its f16 kernels need avx512_core_fp16 and a later
// release), and its bf16 kernels need avx512_core (emulated there, native with avx512_bf16 and
// AMX): on an AVX2 CPU, or with TANDEM_MAX_CPU_ISA=avx2 (tandem/cpu_isa.h), it has none. So a
// storage wrapper sits around the cpu backend: an op whose data dtype is f16, or bf16 where
// cpu::native_bf16() is false, widens its 16-bit tensors to f32 scratch (exactly), runs the f32
// kernel, and rounds its 16-bit outputs back once (nearest even, as tandem::float_to_f16 and
// float_to_bf16). Results are the f32 op's on rounded inputs, rounded once: the native bf16
// path (f32 accumulation, one rounding of each output) computes the same formulas, so the two
// agree within bf16's rounding of the outputs. Tensors in memory and the loader's bytes are
// halved; the arithmetic is not faster (compute_note says so). Ops on f32, and on bf16 where
// oneDNN has it, go straight to the wrapped backend. Thread-safety: as the wrapped backend.
#pragma once

#include "tandem/backend.h"

namespace tandem::ops::cpu {

/// The cpu backend as cpu_backend() returns it: `inner` for f32 and native bf16, f16 (and bf16
/// without native kernels) through f32.
Backend& f16_storage_backend(Backend& inner);

}  // namespace tandem::ops::cpu
