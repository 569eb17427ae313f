#include "tandem/nn/generate/gpt_decoder.h"

#include "nn/module_util.h"
#include "tandem/nn/generate/cached_attention.h"
#include "tandem/ops.h"
#include "tandem/transformer_ops.h"

namespace tandem::nn {
namespace {

const Tensor& host_f32(const Parameter& p) {
  TD_CHECK_ARG(p.value.defined() && p.value.dtype() == DType::f32 && p.value.device().is_host() &&
                   p.value.is_contiguous(),
               "GptDecoder", "parameter '{}' must be a contiguous f32 host tensor, found {} on {}",
               p.name, p.value.defined() ? dtype_name(p.value.dtype()) : "undefined",
               p.value.defined() ? p.value.device().str() : "-");
  return p.value;
}

}  // namespace

GptDecoder::GptDecoder(const Gpt& model) : model_(model), config_(model.config()) {
  for (const Parameter* p :
       {&model.embed.wte, &model.embed.wpe, &model.ln_f.weight, &model.ln_f.bias})
    host_f32(*p);
  const int64_t p = config_.block_size, c = config_.n_embd;
  for (const auto& b : model.h) {
    for (const Parameter* q :
         {&b->ln_1.weight, &b->ln_1.bias, &b->attn.c_attn.weight, &b->attn.c_attn.bias,
          &b->attn.c_proj.weight, &b->attn.c_proj.bias, &b->ln_2.weight, &b->ln_2.bias,
          &b->mlp.c_fc.weight, &b->mlp.c_fc.bias, &b->mlp.c_proj.weight, &b->mlp.c_proj.bias})
      host_f32(*q);
    layers_.push_back({b.get(), Tensor::zeros({p, c}), Tensor::zeros({p, c})});
  }
}

Tensor GptDecoder::append(const std::vector<int64_t>& ids, bool all_logits) {
  const int64_t n = static_cast<int64_t>(ids.size()), c = config_.n_embd, v = config_.vocab_size;
  TD_CHECK_ARG(n >= 1, "GptDecoder", "expected at least 1 token to append, found none");
  TD_CHECK_ARG(pos_ + n <= config_.block_size, "GptDecoder",
               "{} cached and {} new tokens pass the model's {} positions (n_positions)", pos_, n,
               config_.block_size);
  for (int64_t i = 0; i < n; ++i)
    TD_CHECK_ARG(ids[static_cast<size_t>(i)] >= 0 && ids[static_cast<size_t>(i)] < v, "GptDecoder",
                 "token {} at position {} is outside the vocabulary [0, {})",
                 ids[static_cast<size_t>(i)], pos_ + i, v);
  const Device host{};
  const Tensor& tokens = detail::reuse(tokens_, {1, n}, host, DType::i64);
  std::copy(ids.begin(), ids.end(), tokens.data<int64_t>());
  const Tensor& x = detail::reuse(x_, {n, c}, host);
  const Tensor& a = detail::reuse(a_, {n, c}, host);
  const Tensor& qkv = detail::reuse(qkv_, {n, 3 * c}, host);
  const Tensor& att = detail::reuse(att_, {n, c}, host);
  const Tensor& proj = detail::reuse(proj_, {n, c}, host);
  const Tensor& fc = detail::reuse(fc_, {n, 4 * c}, host);
  const Tensor& mean = detail::reuse(mean_, {n}, host);
  const Tensor& rstd = detail::reuse(rstd_, {n}, host);
  // Token and position embedding of positions pos_ .. pos_ + n - 1.
  ops::embedding_forward(tokens, model_.embed.wte.value, model_.embed.wpe.value.narrow(0, pos_, n),
                         x.view({1, n, c}));
  const float eps = config_.layer_norm_epsilon;
  for (Layer& l : layers_) {
    const Block& b = *l.block;
    // h = x + c_proj(attention(c_attn(ln_1(x)))), the new queries against the cache.
    ops::layer_norm_forward(x, b.ln_1.weight.value, b.ln_1.bias.value, eps, a, mean, rstd);
    ops::linear_in_out_forward(a, b.attn.c_attn.weight.value, b.attn.c_attn.bias.value, qkv);
    cached_attention(qkv, pos_, config_.n_head, l.k, l.v, att);
    ops::linear_in_out_forward(att, b.attn.c_proj.weight.value, b.attn.c_proj.bias.value, proj);
    ops::add_forward(x, proj, x);
    // y = h + c_proj(gelu(c_fc(ln_2(h)))).
    ops::layer_norm_forward(x, b.ln_2.weight.value, b.ln_2.bias.value, eps, a, mean, rstd);
    ops::linear_in_out_forward(a, b.mlp.c_fc.weight.value, b.mlp.c_fc.bias.value, fc);
    ops::gelu_forward(fc, fc);
    ops::linear_in_out_forward(fc, b.mlp.c_proj.weight.value, b.mlp.c_proj.bias.value, proj);
    ops::add_forward(x, proj, x);
  }
  pos_ += n;
  // ln_f and the tied lm_head (logits = h wte^T) on the rows asked for.
  const int64_t m = all_logits ? n : 1;
  const Tensor rows = x.narrow(0, n - m, m);
  const Tensor hf = a.narrow(0, 0, m);
  const Tensor& logits = detail::reuse(logits_, {m, v}, host);
  ops::layer_norm_forward(rows, model_.ln_f.weight.value, model_.ln_f.bias.value, eps, hf,
                          mean.narrow(0, 0, m), rstd.narrow(0, 0, m));
  ops::linear_forward(hf, model_.embed.wte.value, Tensor(), logits);
  return logits;
}

}  // namespace tandem::nn
