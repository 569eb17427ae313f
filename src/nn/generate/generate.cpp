#include "tandem/nn/generate/generate.h"

#include <chrono>

#include "tandem/error.h"

namespace tandem::nn {

double GenerateResult::decode_tokens_per_s() const {
  return tokens.size() >= 2 && decode_seconds > 0
             ? static_cast<double>(tokens.size() - 1) / decode_seconds
             : 0.0;
}

void check_generate(const GptConfig& config, const std::vector<int64_t>& prompt,
                    const GenerateOptions& o) {
  TD_CHECK_ARG(!prompt.empty(), "generate", "the prompt is empty: expected at least 1 token");
  for (size_t i = 0; i < prompt.size(); ++i)
    TD_CHECK_ARG(prompt[i] >= 0 && prompt[i] < config.vocab_size, "generate",
                 "prompt token {} at position {} is outside the model's vocabulary [0, {})",
                 prompt[i], i, config.vocab_size);
  TD_CHECK_ARG(o.max_new_tokens >= 0, "generate", "max_new_tokens {}: expected an integer >= 0",
               o.max_new_tokens);
  const int64_t t = static_cast<int64_t>(prompt.size()), room = config.block_size - t;
  TD_CHECK_ARG(o.max_new_tokens <= room, "generate",
               "a prompt of {} tokens and max_new_tokens {} pass the model's {} positions "
               "(n_positions): expected "
               "at most {} new tokens{}",
               t, o.max_new_tokens, config.block_size, room < 0 ? 0 : room,
               room < 0 ? " and a shorter prompt" : "");
  check_sampling(o.sampling);
}

GenerateResult generate(GptDecoder& decoder, const std::vector<int64_t>& prompt,
                        const GenerateOptions& o, const std::function<bool(int64_t)>& on_token) {
  check_generate(decoder.config(), prompt, o);
  using clock = std::chrono::steady_clock;
  const auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  GenerateResult r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  r.finish_reason = "length";
  decoder.reset();
  if (o.max_new_tokens == 0) return r;
  const int64_t vocab = decoder.config().vocab_size;
  const auto t0 = clock::now();
  Tensor logits = decoder.append(prompt);
  auto mark = clock::now();
  r.prefill_seconds = seconds(t0, mark);
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    const int64_t position = decoder.position();  // the new token's
    const int64_t id = sample_token(logits.data<float>(), vocab, o.sampling, position);
    r.tokens.push_back(id);
    const auto now = clock::now();
    (i == 0 ? r.prefill_seconds : r.decode_seconds) += seconds(mark, now);
    mark = now;
    const bool go_on = on_token ? on_token(id) : true;
    if (id == o.eos_id || !go_on) {
      r.finish_reason = "stop";
      break;
    }
    if (i + 1 == o.max_new_tokens) break;
    logits = Tensor();  // lets the decoder reuse its logits buffer
    mark = clock::now();
    logits = decoder.append({id});
  }
  return r;
}

}  // namespace tandem::nn
