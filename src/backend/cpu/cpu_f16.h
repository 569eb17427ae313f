// f16 on the cpu: storage, not compute. oneDNN 2.6 has no f16 convolution or matrix product
// on the CPU (its f16 kernels need avx512_core_fp16 and a later release), so F16Storage wraps
// the cpu backend: an op whose data dtype is f16 widens its f16 tensors to f32 scratch
// (exactly), runs the f32 kernel, and rounds its f16 outputs back once (nearest even, as
// tandem::float_to_f16). Results are the f32 op's on f16-rounded inputs, rounded to f16;
// tensors of memory and the loader's bytes are halved, the arithmetic is not faster. Ops on
// f32 and bf16 go straight to the wrapped backend. Thread-safety: as the wrapped backend.
#pragma once

#include "tandem/backend.h"

namespace tandem::ops::cpu {

/// The cpu backend as cpu_backend() returns it: `inner` for f32/bf16, f16 through f32.
Backend& f16_storage_backend(Backend& inner);

}  // namespace tandem::ops::cpu
