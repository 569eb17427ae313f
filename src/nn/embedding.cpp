#include "tandem/nn/embedding.h"

#include "nn/module_util.h"
#include "tandem/transformer_ops.h"

namespace tandem::nn {

TokenPositionEmbedding::TokenPositionEmbedding(int64_t vocab_size, int64_t block_size, int64_t n_embd, float init_std)
    : vocab_(vocab_size), block_(block_size), c_(n_embd), init_std_(init_std) {
  TD_CHECK_ARG(vocab_size >= 1 && block_size >= 1 && n_embd >= 1, "TokenPositionEmbedding",
               "expected vocab_size, block_size and n_embd >= 1, found {}, {} and {}", vocab_size, block_size, n_embd);
  wte = detail::make_parameter("wte.weight", {vocab_, c_});
  wpe = detail::make_parameter("wpe.weight", {block_, c_});
  wte.low_precision = wpe.low_precision = true;
  uint64_t index = 0;
  reset_parameters(0, index);
}

void TokenPositionEmbedding::reset_parameters(uint64_t seed, uint64_t& index) {
  detail::normal_init(wte, init_std_, seed, index++);
  detail::normal_init(wpe, init_std_, seed, index++);
}

Tensor TokenPositionEmbedding::forward(const Tensor& tokens) {
  TD_CHECK_ARG(tokens.defined() && tokens.dim() == 2 && tokens.size(1) <= block_, "TokenPositionEmbedding",
               "expected tokens [B, T] with T <= block_size {}, found {}", block_,
               tokens.defined() ? shape_str(tokens.shape()) : "undefined");
  const DType dt = compute_dtype();
  const Tensor& y = detail::reuse(y_, {tokens.size(0), tokens.size(1), c_}, tokens.device(), dt);
  ops::embedding_forward(tokens, wte.as(dt), wpe.as(dt), y);
  tokens_ = training_ ? tokens : Tensor();
  return y;
}

Tensor TokenPositionEmbedding::backward(const Tensor& dy) {
  if (!tokens_.defined()) detail::no_forward("TokenPositionEmbedding");
  ops::embedding_backward(dy, tokens_, wte.grad, wpe.grad, true);
  tokens_ = Tensor();
  return Tensor();
}

void TokenPositionEmbedding::collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) {
  detail::push_parameter(prefix, wte, out, "wte.weight");
  detail::push_parameter(prefix, wpe, out, "wpe.weight");
}

void TokenPositionEmbedding::collect_state(const std::string& prefix, std::vector<NamedTensor>& out) {
  out.push_back({prefix + "wte.weight", wte.value, true});
  out.push_back({prefix + "wpe.weight", wpe.value, true});
}

std::string TokenPositionEmbedding::describe() const {
  return fmt::format("TokenPositionEmbedding(wte=Embedding({}, {}), wpe=Embedding({}, {}))", vocab_, c_, block_, c_);
}

Shape TokenPositionEmbedding::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  TD_CHECK_ARG(in.size() == 2 && in[1] <= block_, "plan",
               "TokenPositionEmbedding: expected tokens [B, T] with T <= block_size {}, found {}",
               block_, shape_str(in));
  const Shape out{in[0], in[1], c_};
  plan.add(out, dtype);  // y
  return out;
}

void TokenPositionEmbedding::release_buffers() {
  tokens_ = y_ = Tensor();
}

}  // namespace tandem::nn
