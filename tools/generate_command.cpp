// `tandem generate --weights F --prompt TEXT`: text from a GPT-2's weights, printed as it is
// made (include/tandem/nn/generate/generate.h: prefill, then one position per token through the
// key/value cache). The text (prompt and continuation) goes to stdout; a line with the token
// counts and speeds to stderr.
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "tandem/error.h"
#include "tandem/nn/generate/generate.h"
#include "tandem/nn/generate/gpt_weights.h"
#include "tandem/ops.h"
#include "tandem/thread_pool.h"
#include "tandem/train/model_card.h"

namespace tandem::tools {

namespace {

struct GenerateFlags {
  std::string weights, prompt, prompt_ids, tokenizer, data_dir;
  int64_t max_new_tokens = 64;
  double temperature = 0.8;
  int64_t top_k = 40;
  double top_p = 1.0;
  uint64_t seed = 0;
  int64_t n_head = 0;
  int threads = 0;
  bool ids = false, ignore_eos = false;
};

GenerateFlags& flags() {
  static GenerateFlags f;
  return f;
}

// "1,2,3" -> ids; Error(invalid_argument) naming the flag for anything else.
std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    int64_t v = 0;
    const char* b = text.data() + begin;
    const char* e = text.data() + end;
    while (b < e && *b == ' ') ++b;
    const auto [ptr, ec] = std::from_chars(b, e, v);
    TD_CHECK_ARG(ec == std::errc() && ptr == e && b < e, "generate",
                 "--prompt-ids '{}': expected token ids separated by commas, e.g. 1,2,3",
                 text.substr(0, 64));
    ids.push_back(v);
    begin = end + 1;
  }
  return ids;
}

// Prints the text of `ids` as it grows: the part of each new decoding past what was printed.
class TextPrinter {
 public:
  explicit TextPrinter(const data::Tokenizer* tokenizer) : tokenizer_(tokenizer) {}
  void add(int64_t id) {
    if (!tokenizer_) {
      fmt::print("{}{}", any_ ? "," : "", id);
      any_ = true;
    } else {
      if (id < tokenizer_->vocab_size()) ids_.push_back(static_cast<int>(id));
      const std::string text = tokenizer_->decode(ids_);
      // A piece may change how the text before it decodes: print only what extends it.
      if (text.size() > printed_.size() && text.compare(0, printed_.size(), printed_) == 0) {
        std::fwrite(text.data() + printed_.size(), 1, text.size() - printed_.size(), stdout);
        printed_ = text;
      }
    }
    std::fflush(stdout);
  }
  void end() {  // flushed, so the stats line on stderr comes after the text on a terminal
    fmt::print("\n");
    std::fflush(stdout);
  }

 private:
  const data::Tokenizer* tokenizer_;
  std::vector<int> ids_;
  std::string printed_;
  bool any_ = false;
};

}  // namespace

void add_generate_command(CLI::App& app) {
  GenerateFlags& f = flags();
  CLI::App* c = app.add_subcommand("generate",
                                   "Generate text with a GPT's weights (tandem train --save, or "
                                   "transformers' GPT-2 model.safetensors)");
  c->add_option("--weights", f.weights, "safetensors file of GPT-2 weights")->required();
  c->add_option("--prompt", f.prompt, "Text to continue (needs the tokenizer)");
  c->add_option("--prompt-ids", f.prompt_ids,
                "Token ids to continue instead of --prompt, e.g. 1,2,3");
  c->add_option(
       "--max-new-tokens", f.max_new_tokens,
       "Tokens to generate at most (the prompt and these must fit the model's n_positions)")
      ->capture_default_str();
  c->add_option("--temperature", f.temperature,
                "Sampling temperature: logits divided by it; 0 = greedy (argmax)")
      ->capture_default_str();
  c->add_option("--top-k", f.top_k,
                "Sample only among the K largest logits (0 = every token; 1 = greedy)")
      ->capture_default_str();
  c->add_option("--top-p", f.top_p,
                "Nucleus sampling: only the most likely tokens whose probabilities add up to P, "
                "after --top-k (1 = every token)")
      ->capture_default_str();
  c->add_option("--seed", f.seed, "Seed of the sampling draws: the same seed gives the same text")
      ->capture_default_str();
  c->add_option(
      "--tokenizer", f.tokenizer,
      "tokenizer.model of the model's text (default: --data DIR's, then the one the weights record "
      "(tandem train --save on token data), then tokenizer.model beside the weights)");
  c->add_option("--data", f.data_dir,
                "Token data folder of tandem tokenize whose tokenizer.model to use");
  c->add_option("--n-head", f.n_head,
                "Attention heads, for weights that record no GPT2Config (a transformers "
                "model.safetensors without "
                "config.json beside it)")
      ->capture_default_str();
  c->add_option("--threads", f.threads, "Compute threads (0 = all available cores)")
      ->capture_default_str();
  c->add_flag("--ids", f.ids, "Print token ids (comma-separated) instead of text");
  c->add_flag("--ignore-eos", f.ignore_eos,
              "Go on past the tokenizer's end-of-text id (default: stop there)");
  strict_values(c);
}

int run_generate_command() {
  const GenerateFlags& f = flags();
  TD_CHECK_ARG(f.max_new_tokens >= 0, "generate", "--max-new-tokens {}: expected an integer >= 0",
               f.max_new_tokens);
  TD_CHECK_ARG(std::isfinite(f.temperature) && f.temperature >= 0, "generate",
               "--temperature {}: expected a number >= 0 (0 = greedy)", f.temperature);
  TD_CHECK_ARG(f.top_k >= 0, "generate", "--top-k {}: expected an integer >= 0 (0 = every token)",
               f.top_k);
  TD_CHECK_ARG(f.top_p > 0 && f.top_p <= 1, "generate",
               "--top-p {}: expected a number in (0, 1] (1 = every token)", f.top_p);
  TD_CHECK_ARG(f.n_head >= 0, "generate", "--n-head {}: expected an integer >= 1 (0 = the file's)",
               f.n_head);
  TD_CHECK_ARG(f.threads >= 0 && f.threads <= 1024, "generate", "--threads {}: expected 0..1024",
               f.threads);
  TD_CHECK_ARG(f.prompt.empty() != f.prompt_ids.empty(), "generate",
               "expected exactly one of --prompt TEXT and --prompt-ids IDS, got {}",
               f.prompt.empty() ? "neither" : "both");
  std::vector<int64_t> prompt;
  if (!f.prompt_ids.empty())
    prompt = parse_ids(f.prompt_ids);  // before the weights: a typo is said at once
  ops::set_num_threads(f.threads > 0 ? f.threads : available_cores());
  std::map<std::string, std::string> metadata;
  const std::unique_ptr<nn::Gpt> model = nn::load_gpt(f.weights, f.n_head, &metadata);
  const nn::GptConfig& g = model->config();
  for (const nn::NamedTensor& t : model->state_dict()) {  // NaN weights would pick token 0 for ever
    if (t.tensor.dtype() != DType::f32) continue;
    const float* v = t.tensor.data<float>();
    for (int64_t i = 0; i < t.tensor.numel(); ++i)
      TD_CHECK_ARG(std::isfinite(v[i]), "generate", "--weights {}: tensor '{}' holds {} at element {}: expected finite weights",
                   f.weights, t.name, std::isnan(v[i]) ? "NaN" : "inf", i);
  }
  if (!f.data_dir.empty())
    TD_CHECK(train::find_tokenizer("", f.data_dir, "", {}) != "", ErrorCode::io, "generate",
             "--data {}: no tokenizer.model in it (expected a folder written by tandem tokenize)",
             f.data_dir);
  const std::string tokenizer_path =
      train::find_tokenizer(f.tokenizer, f.data_dir, f.weights, metadata);
  TD_CHECK_ARG(!tokenizer_path.empty() || f.prompt.empty(), "generate",
               "--prompt needs the model's tokenizer.model and none was found (not recorded in {} "
               "nor beside it): "
               "pass --tokenizer FILE or --data DIR, or give --prompt-ids",
               f.weights);
  const train::ModelCard card = train::language_model_card(
      metadata.count("model") ? metadata["model"] : "gpt2", g, tokenizer_path);
  const data::Tokenizer* tok = f.ids ? nullptr : card.tokenizer.get();
  if (!f.prompt.empty()) {
    for (int id : card.tokenizer->encode(f.prompt)) prompt.push_back(id);
    TD_CHECK_ARG(!prompt.empty(), "generate",
                 "--prompt '{}' encodes to no tokens: expected some text", f.prompt.substr(0, 64));
  }
  nn::check_generate(g, prompt, {0, {}, -1});  // the ids against the vocabulary, first
  const int64_t t = static_cast<int64_t>(prompt.size());
  TD_CHECK_ARG(
      t + f.max_new_tokens <= g.block_size, "generate",
      "a prompt of {} tokens and --max-new-tokens {} pass the model's {} positions (n_positions): "
      "expected --max-new-tokens at most {}",
      t, f.max_new_tokens, g.block_size, std::max<int64_t>(0, g.block_size - t));
  nn::GenerateOptions o;
  o.max_new_tokens = f.max_new_tokens;
  o.sampling = {f.temperature, f.top_k, f.seed, f.top_p};
  o.eos_id = card.tokenizer && !f.ignore_eos ? card.tokenizer->eos_id() : -1;
  nn::check_generate(g, prompt, o);  // everything, before any output
  nn::GptDecoder decoder(*model);
  TextPrinter out(tok);
  for (int64_t id : prompt) out.add(id);
  const nn::GenerateResult r = nn::generate(decoder, prompt, o, [&out](int64_t id) {
    out.add(id);
    return true;
  });
  out.end();
  std::fprintf(stderr,
               "tandem generate: %lld prompt tokens, %zu new (%s); prefill and first token %.1f "
               "ms, then %.1f "
               "tokens/s (%s, %d thread%s)\n",
               static_cast<long long>(r.prompt_tokens), r.tokens.size(),
               r.finish_reason == "stop" ? "stopped at end of text" : "max-new-tokens",
               1e3 * r.prefill_seconds, r.decode_tokens_per_s(), model->describe().c_str(),
               f.threads > 0 ? f.threads : available_cores(),
               (f.threads > 0 ? f.threads : available_cores()) == 1 ? "" : "s");
  return 0;
}

}  // namespace tandem::tools
