#include "tandem/nn/transformer_block.h"

#include <cmath>
#include <utility>

#include "nn/module_util.h"
#include "tandem/transformer_ops.h"

namespace tandem::nn {
namespace {

int64_t checked_heads(int64_t n_embd, int64_t n_head) {
  TD_CHECK_ARG(n_embd >= 1 && n_head >= 1 && n_embd % n_head == 0, "CausalSelfAttention",
               "n_head {} must be >= 1 and divide n_embd {}", n_head, n_embd);
  return n_head;
}

float proj_std(int64_t n_layer) {
  TD_CHECK_ARG(n_layer >= 1, "Block", "n_layer must be >= 1, found {}", n_layer);
  return static_cast<float>(0.02 / std::sqrt(2.0 * static_cast<double>(n_layer)));
}

}  // namespace

// ---- CausalSelfAttention ----

CausalSelfAttention::CausalSelfAttention(int64_t n_embd, int64_t n_head, float proj_init_std)
    : c_attn(n_embd, 3 * n_embd),
      c_proj(n_embd, n_embd, proj_init_std),
      c_(n_embd),
      n_head_(checked_heads(n_embd, n_head)) {}

std::vector<NamedChild> CausalSelfAttention::named_children() { return {{"c_attn", &c_attn}, {"c_proj", &c_proj}}; }

void CausalSelfAttention::set_needs_input_grad(bool on) {
  needs_input_grad_ = on;
  c_attn.set_needs_input_grad(on);
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  TD_CHECK_ARG(x.dim() == 3 && x.size(2) == c_, "CausalSelfAttention", "expected input [B, T, {}], found {}", c_,
               shape_str(x.shape()));
  const int64_t b = x.size(0), t = x.size(1);
  qkv_ = c_attn.forward(x);
  const Tensor& y = detail::reuse(y_, {b, t, c_}, x.device(), x.dtype());
  const Tensor& lse = detail::reuse(lse_, {b, n_head_, t}, x.device());
  ops::attention_forward(qkv_, n_head_, y, lse);
  have_forward_ = training_;
  if (!training_) qkv_ = Tensor();
  return c_proj.forward(y);
}

Tensor CausalSelfAttention::backward(const Tensor& dy) {
  if (!have_forward_) detail::no_forward("CausalSelfAttention");
  have_forward_ = false;
  const Tensor dyo = c_proj.backward(dy);
  report_grad_ready(c_proj, {&c_proj.weight, &c_proj.bias});
  const Tensor& dqkv = detail::reuse(dqkv_, qkv_.shape(), qkv_.device(), qkv_.dtype());
  ops::attention_backward(dyo, qkv_, y_, lse_, n_head_, dqkv);
  qkv_ = Tensor();
  Tensor dx = c_attn.backward(dqkv);
  report_grad_ready(c_attn, {&c_attn.weight, &c_attn.bias});
  return dx;
}

Shape CausalSelfAttention::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  TD_CHECK_ARG(in.size() == 3 && in[2] == c_, "plan",
               "CausalSelfAttention: expected input [B, T, {}], found {}", c_, shape_str(in));
  const Shape qkv = c_attn.plan_buffers(in, dtype, plan);
  plan.add(in, dtype);                            // y
  plan.add({in[0], n_head_, in[1]}, DType::f32);  // lse
  const Shape out = c_proj.plan_buffers(in, dtype, plan);
  plan.add_train(qkv, dtype);  // dqkv
  return out;
}

void CausalSelfAttention::release_buffers() {
  c_attn.release_buffers();
  c_proj.release_buffers();
  qkv_ = y_ = lse_ = dqkv_ = Tensor();
  have_forward_ = false;
}

std::string CausalSelfAttention::describe() const {
  return fmt::format("CausalSelfAttention(\n  (c_attn): {}\n  (c_proj): {}\n  n_head={}\n)", c_attn.describe(),
                     c_proj.describe(), n_head_);
}

// ---- MLP ----

MLP::MLP(int64_t n_embd, float proj_init_std) : c_fc(n_embd, 4 * n_embd), c_proj(4 * n_embd, n_embd, proj_init_std) {}

std::vector<NamedChild> MLP::named_children() { return {{"c_fc", &c_fc}, {"act", &act}, {"c_proj", &c_proj}}; }

void MLP::set_needs_input_grad(bool on) {
  needs_input_grad_ = on;
  c_fc.set_needs_input_grad(on);
}

Tensor MLP::forward(const Tensor& x) { return c_proj.forward(act.forward(c_fc.forward(x))); }

Tensor MLP::backward(const Tensor& dy) {
  const Tensor g = act.backward(c_proj.backward(dy));
  report_grad_ready(c_proj, {&c_proj.weight, &c_proj.bias});
  Tensor dx = c_fc.backward(g);
  report_grad_ready(c_fc, {&c_fc.weight, &c_fc.bias});
  return dx;
}

Shape MLP::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  return c_proj.plan_buffers(act.plan_buffers(c_fc.plan_buffers(in, dtype, plan), dtype, plan),
                             dtype, plan);
}

std::string MLP::describe() const {
  return fmt::format("GPT2MLP(\n  (c_fc): {}\n  (act): {}\n  (c_proj): {}\n)", c_fc.describe(), act.describe(),
                     c_proj.describe());
}

// ---- Block ----

Block::Block(int64_t n_embd, int64_t n_head, int64_t n_layer, float eps)
    : RecomputingBlock("Block", Output::own),
      ln_1(n_embd, eps),
      attn(n_embd, n_head, proj_std(n_layer)),
      ln_2(n_embd, eps),
      mlp(n_embd, proj_std(n_layer)) {}

std::vector<NamedChild> Block::named_children() {
  return {{"ln_1", &ln_1}, {"attn", &attn}, {"ln_2", &ln_2}, {"mlp", &mlp}};
}

void Block::set_needs_input_grad(bool on) {
  needs_input_grad_ = on;
  ln_1.set_needs_input_grad(on);
}

void Block::compute(const Tensor& x, bool output) {
  const Tensor a = attn.forward(ln_1.forward(x));
  const Tensor& h = detail::reuse(h_, x.shape(), x.device(), x.dtype());
  ops::add_forward(x, a, h);
  const Tensor m = mlp.forward(ln_2.forward(h));
  if (!output) return;
  const Tensor& y = detail::reuse(y_, x.shape(), x.device(), x.dtype());
  ops::add_forward(h, m, y);
}

void Block::release_internals() {
  ln_1.release_buffers();
  attn.release_buffers();
  ln_2.release_buffers();
  mlp.release_buffers();
  h_ = dh_ = dx_ = Tensor();
}

Tensor Block::run_forward(const Tensor& x) {
  compute(x, true);
  return y_;
}

// dh = dy + ln_2'(mlp'(dy)); dx = dh + ln_1'(attn'(dh)) (the residual adds pass dy through).
Tensor Block::run_backward(const Tensor& dy) {
  const Tensor dm = ln_2.backward(mlp.backward(dy));
  report_grad_ready(ln_2, {&ln_2.weight, &ln_2.bias});
  const Tensor& dh = detail::reuse(dh_, dy.shape(), dy.device(), dy.dtype());
  ops::add_forward(dy, dm, dh);
  const Tensor da = attn.backward(dh);
  Tensor dl = ln_1.backward(da);
  report_grad_ready(ln_1, {&ln_1.weight, &ln_1.bias});
  Tensor dx;
  if (needs_input_grad_) {
    dx = detail::reuse(dx_, dy.shape(), dy.device(), dy.dtype());
    ops::add_forward(dh, dl, dx);
  }
  return dx;
}

// The LayerNorms', the attention's and the MLP's buffers, h and the gradients; the output y is
// the block's own (RecomputingBlock::plan_buffers counts it).
Shape Block::plan_internals(const Shape& in, DType dtype, BufferPlan& p) {
  attn.plan_buffers(ln_1.plan_buffers(in, dtype, p), dtype, p);
  p.add(in, dtype);  // h
  mlp.plan_buffers(ln_2.plan_buffers(in, dtype, p), dtype, p);
  p.add_train(in, dtype);                         // dh
  if (needs_input_grad_) p.add_train(in, dtype);  // dx
  return in;
}

std::string Block::describe() const {
  return "GPT2Block(\n  (ln_1): " + ln_1.describe() + "\n  (attn): " + detail::indent_lines(attn.describe()) +
         "\n  (ln_2): " + ln_2.describe() + "\n  (mlp): " + detail::indent_lines(mlp.describe()) + "\n)";
}

}  // namespace tandem::nn
