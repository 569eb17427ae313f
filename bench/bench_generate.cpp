// Generation speed of a GPT-2 on the host: tokens per second through the key/value cache
// (nn::generate: one position per token) against a rerun of Gpt::forward over the whole
// sequence for every token (what generation costs without the cache), same model, prompt and
// greedy tokens.
// Usage: bench_generate [model=gpt-mini] [vocab=4096] [prompt=16] [new=128] [threads=0: all cores]
// Prints: model, prefill_ms, cached_tokens_per_s, rerun_tokens_per_s, speedup.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tandem/nn/generate/generate.h"
#include "tandem/ops.h"
#include "tandem/thread_pool.h"

int main(int argc, char** argv) {
  using namespace tandem;
  using Clock = std::chrono::steady_clock;
  const std::string name = argc > 1 ? argv[1] : "gpt-mini";
  const int64_t vocab = argc > 2 ? std::atoll(argv[2]) : 4096, t = argc > 3 ? std::atoll(argv[3]) : 16,
                n = argc > 4 ? std::atoll(argv[4]) : 128;
  const int threads = argc > 5 && std::atoi(argv[5]) > 0 ? std::atoi(argv[5]) : available_cores();
  ops::set_num_threads(threads);
  nn::Gpt model(nn::gpt_config(name, vocab));
  model.eval();
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < t; ++i) prompt.push_back((i * 31 + 7) % vocab);
  nn::GptDecoder decoder(model);
  nn::GenerateOptions o;
  o.max_new_tokens = n;
  o.sampling.temperature = 0;
  nn::generate(decoder, prompt, {4, o.sampling, -1});  // warm-up: oneDNN primitives, pages
  const nn::GenerateResult r = nn::generate(decoder, prompt, o);
  // Without the cache: the whole sequence again for each new token.
  std::vector<int64_t> seq = prompt;
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    Tensor tokens = Tensor::empty({1, static_cast<int64_t>(seq.size())}, DType::i64);
    std::copy(seq.begin(), seq.end(), tokens.data<int64_t>());
    const Tensor logits = model.forward(tokens);
    seq.push_back(nn::argmax(logits.data<float>() + (seq.size() - 1) * vocab, vocab));
  }
  const double rerun_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const bool same = std::equal(r.tokens.begin(), r.tokens.end(), seq.begin() + t);
  const double cached_tps = static_cast<double>(r.tokens.size()) / (r.prefill_seconds + r.decode_seconds);
  std::printf("model %s vocab %lld prompt %lld new %lld threads %d: prefill_ms %.2f cached_tokens_per_s %.1f "
              "(after the first: %.1f) rerun_tokens_per_s %.1f speedup %.2fx same_tokens %s\n",
              name.c_str(), static_cast<long long>(vocab), static_cast<long long>(t), static_cast<long long>(n),
              threads, 1e3 * r.prefill_seconds, cached_tps, r.decode_tokens_per_s(), n / rerun_s,
              cached_tps / (n / rerun_s), same ? "yes" : "NO");
  return same ? 0 : 1;
}
