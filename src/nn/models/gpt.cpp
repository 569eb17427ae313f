#include "tandem/nn/gpt.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "nn/module_util.h"
#include "tandem/ops.h"
#include "tandem/transformer_ops.h"

namespace tandem::nn {
namespace {

const GptConfig& checked(const GptConfig& c) {
  TD_CHECK_ARG(c.vocab_size >= 1 && c.block_size >= 1 && c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1, "Gpt",
               "expected sizes >= 1, found vocab_size {}, block_size {}, n_layer {}, n_head {}, n_embd {}",
               c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd);
  TD_CHECK_ARG(c.n_embd % c.n_head == 0, "Gpt", "n_head {} must divide n_embd {}", c.n_head, c.n_embd);
  return c;
}

struct Named {
  const char* name;
  int64_t n_layer, n_head, n_embd, block_size;
};
constexpr Named kConfigs[] = {{"gpt2", 12, 12, 768, 1024},
                              {"gpt2-medium", 24, 16, 1024, 1024},
                              {"gpt2-large", 36, 20, 1280, 1024},
                              {"gpt2-xl", 48, 25, 1600, 1024},
                              {"gpt-mini", 6, 6, 384, 256}};

}  // namespace

std::vector<std::string> gpt_config_names() {
  std::vector<std::string> out;
  for (const Named& n : kConfigs) out.push_back(n.name);
  return out;
}

GptConfig gpt_config(const std::string& name, int64_t vocab_size) {
  TD_CHECK_ARG(vocab_size >= 1, "model", "{}: vocab_size must be >= 1, found {}", name, vocab_size);
  for (const Named& n : kConfigs)
    if (name == n.name) return GptConfig{vocab_size, n.block_size, n.n_layer, n.n_head, n.n_embd, 1e-5f};
  throw_error(ErrorCode::invalid_argument, "model",
              fmt::format("unknown GPT '{}' (expected {})", name, fmt::join(gpt_config_names(), ", ")));
}

Gpt::Gpt(const GptConfig& config)
    : embed(checked(config).vocab_size, config.block_size, config.n_embd),
      ln_f(config.n_embd, config.layer_norm_epsilon),
      config_(config) {
  for (int64_t i = 0; i < config.n_layer; ++i) {
    h.push_back(std::make_unique<Block>(config.n_embd, config.n_head, config.n_layer, config.layer_norm_epsilon));
    block_names_.push_back("transformer.h." + std::to_string(i));
    blocks_.push_back(h.back().get());
  }
  init_parameters(0);
  parameters();  // full names on every Parameter (the blocks named theirs locally first)
}

std::vector<NamedChild> Gpt::named_children() {
  std::vector<NamedChild> out{{"transformer", &embed}};
  for (size_t i = 0; i < h.size(); ++i) out.push_back({block_names_[i], h[i].get()});
  out.push_back({"transformer.ln_f", &ln_f});
  return out;
}

std::vector<ops::Op> Gpt::own_ops() const {
  return {ops::Op::linear_forward, ops::Op::linear_backward_data, ops::Op::linear_backward_weights,
          ops::Op::classifier_cross_entropy};
}

void Gpt::set_block_devices(std::vector<Device> devices, CrossFn cross) {
  loop_.set_devices(std::move(devices), std::move(cross), h.size());
}

ModelBlocks Gpt::blocks() {
  ModelBlocks d;
  d.outer = {{"transformer", &embed}, {"transformer.ln_f", &ln_f}};
  for (size_t i = 0; i < h.size(); ++i) d.blocks.push_back({block_names_[i], h[i].get()});
  d.kind = "GPT";
  d.outer_label = "embedding, ln_f and lm_head";
  d.outer_phrase = "the embedding, ln_f and the tied lm_head";
  d.places_blocks = true;
  d.block_devices = loop_.devices();
  return d;
}

void Gpt::set_param_stream(ParamStream* stream) { loop_.set_stream(stream); }

// The embedding, the blocks (BlockLoop: devices, streaming), ln_f.
Tensor Gpt::hidden(const Tensor& tokens) {
  const Pass pass = training_ ? Pass::forward : Pass::eval;
  loop_.begin(pass);
  const Tensor x = loop_.forward(blocks_, embed.forward(tokens), pass);
  hf_ = ln_f.forward(x);
  return hf_;
}

void Gpt::backward_hidden(const Tensor& dh) {
  Tensor g = ln_f.backward(dh);
  report_grad_ready(ln_f, {&ln_f.weight, &ln_f.bias});
  g = loop_.backward(blocks_, g);
  embed.backward(g);
  report_grad_ready(embed, {&embed.wte, &embed.wpe});
  loop_.end(Pass::backward);
}

Tensor Gpt::forward(const Tensor& tokens) {
  const Tensor x = hidden(tokens);
  const int64_t b = x.size(0), t = x.size(1), v = config_.vocab_size, c = config_.n_embd;
  const DType dt = x.dtype();
  const Tensor& logits = detail::reuse(logits_, {b, t, v}, x.device(), dt);
  ops::linear_forward(x.view({b * t, c}), embed.wte.as(dt), Tensor(), logits.view({b * t, v}));
  have_logits_ = training_;
  have_loss_ = false;
  if (!training_) hf_ = Tensor();
  if (!training_) loop_.end(Pass::eval);
  return logits;
}

Tensor Gpt::backward(const Tensor& dlogits) {
  if (!have_logits_) detail::no_forward("Gpt");
  have_logits_ = false;
  const int64_t b = hf_.size(0), t = hf_.size(1), v = config_.vocab_size, c = config_.n_embd;
  TD_CHECK_ARG(dlogits.shape() == Shape({b, t, v}), "Gpt", "dlogits must be [{}, {}, {}], found {}", b, t, v,
               shape_str(dlogits.shape()));
  const DType dt = hf_.dtype();
  const Tensor& dh = detail::reuse(dh_, hf_.shape(), hf_.device(), dt);
  const Tensor d2 = dlogits.view({b * t, v});
  ops::linear_backward_data(d2, embed.wte.as(dt), dh.view({b * t, c}));
  ops::linear_backward_weights(hf_.view({b * t, c}), d2, embed.wte.grad, Tensor(), true);
  hf_ = Tensor();
  backward_hidden(dh);
  return Tensor();
}

void Gpt::forward_loss(const Tensor& tokens, const Tensor& targets, const Tensor& metrics, float grad_loss,
                       int64_t ignore_index, const Tensor& grad_scale) {
  const Tensor x = hidden(tokens);
  TD_CHECK_ARG(targets.defined() && targets.shape() == tokens.shape(), "Gpt",
               "targets must have the tokens' shape {}, found {}", shape_str(tokens.shape()),
               targets.defined() ? shape_str(targets.shape()) : "undefined");
  const int64_t n = x.size(0) * x.size(1), c = config_.n_embd;
  const DType dt = x.dtype();
  Tensor dh;
  if (training_) dh = detail::reuse(dh_, x.shape(), x.device(), dt);
  ops::classifier_cross_entropy(x.view({n, c}), embed.wte.as(dt), targets.view({n}), ignore_index, grad_loss,
                                training_ ? dh.view({n, c}) : Tensor(), training_ ? embed.wte.grad : Tensor(), true,
                                metrics, training_ ? grad_scale : Tensor());
  have_loss_ = training_;
  have_logits_ = false;
  if (!training_) hf_ = Tensor();
  if (!training_) loop_.end(Pass::eval);
}

void Gpt::backward_loss() {
  if (!have_loss_) detail::no_forward("Gpt (forward_loss)");
  have_loss_ = false;
  hf_ = Tensor();
  backward_hidden(dh_);
}

Shape Gpt::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  Shape x = embed.plan_buffers(in, dtype, plan);
  for (auto& b : h) x = b->plan_buffers(x, dtype, plan);
  x = ln_f.plan_buffers(x, dtype, plan);
  plan.add_train(x, dtype);  // dh: the fused loss's gradient w.r.t. the hidden states
  return x;
}

void Gpt::release_buffers() {
  Module::release_buffers();
  hf_ = logits_ = dh_ = Tensor();
  have_logits_ = have_loss_ = false;
}

std::vector<std::pair<std::string, std::string>> Gpt::tied_state() const {
  return {{"lm_head.weight", "transformer.wte.weight"}};
}

std::vector<std::pair<std::string, std::string>> Gpt::config_metadata() const {
  const GptConfig& c = config_;
  return {{"vocab_size", std::to_string(c.vocab_size)},
          {"n_positions", std::to_string(c.block_size)},
          {"n_embd", std::to_string(c.n_embd)},
          {"n_layer", std::to_string(c.n_layer)},
          {"n_head", std::to_string(c.n_head)},
          {"layer_norm_epsilon", fmt::format("{}", c.layer_norm_epsilon)}};
}

std::string Gpt::describe() const {
  const GptConfig& c = config_;
  return fmt::format("GPT2LMHeadModel(vocab_size={}, block_size={}, n_layer={}, n_head={}, n_embd={}, tied lm_head)",
                     c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd);
}

}  // namespace tandem::nn
