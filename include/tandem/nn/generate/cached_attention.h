// Causal self-attention of new positions against a key/value cache: the decoding step of a
// GPT-2 (Radford et al. 2019; transformers' GPT2Attention with past_key_values). The keys and
// values of every earlier position are kept, so position p costs one query against p + 1
// cached keys instead of a rerun of the whole sequence (the "KV cache" of Pope et al. 2022,
// "Efficiently Scaling Transformer Inference").
// Runs on the host in f32: generation in tandem is one sequence at a time on the CPU (see
// gpt_decoder.h for why), where this loop is a small share of the step next to the matrix
// products; it is not a device op and makes no decision by device kind.
// Thread-safety: reentrant; distinct caches may be used from several threads at once.
#pragma once

#include <cstdint>

#include "tandem/tensor.h"

namespace tandem::nn {

/// qkv [n, 3C] f32 (host, contiguous): c_attn's output for the n new positions p0 .. p0+n-1,
/// q, k and v side by side, heads side by side in each (C = n_head * D).
/// k_cache, v_cache [P, C] f32 (host, contiguous): rows 0 .. p0-1 hold the earlier positions'
/// keys and values; this call writes rows p0 .. p0+n-1 from qkv.
/// y [n, C] f32 (host, contiguous) = per head softmax(q k^T / sqrt(D), keys j <= p0 + i for
/// query i) v: the input of c_proj, as ops::attention_forward computes it for the whole
/// sequence. The softmax subtracts the row's maximum; sums are accumulated in f32.
/// Throws Error(invalid_argument, "[cached_attention] ...") for shapes or dtypes other than
/// these, n_head not dividing C, p0 < 0 or p0 + n > P.
void cached_attention(const Tensor& qkv, int64_t p0, int64_t n_head, const Tensor& k_cache,
                      const Tensor& v_cache, const Tensor& y);

}  // namespace tandem::nn
