// The fp32 constants of one optimizer update, computed once per call on the host
// (ops::adam_constants / ops::sgd_constants in tandem/optim_ops.h) and handed to every
// backend's kernel, so that all backends compute the same bits. Plain structs without
// dependencies: the CUDA kernels include this header too.
#pragma once

namespace tandem::ops {

/// One Adam/AdamW update: step_size = lr/bc1, sqrt_bc2 = sqrt(bc2) (bc1 = 1 - beta1^step,
/// bc2 = 1 - beta2^step, both in double from the integer step), l2 = weight_decay for
/// Adam-L2 else 0, lr_wd = lr*weight_decay for AdamW else 0.
/// noise_seed: the stochastic rounding's seed for bf16 moments (from AdamParams::rounding_seed
/// and step), unused with f32 moments.
struct AdamConstants {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, sqrt_bc2, eps, step_size, l2, lr_wd;
  unsigned noise_seed;
};

/// One SGD update (dampening 0). init_buffer: the momentum buffer is set to the gradient
/// instead of being read (first update of a parameter).
struct SgdConstants {
  float lr, momentum, weight_decay;
  bool nesterov, init_buffer;
};

}  // namespace tandem::ops
