// Language-model defaults: a sequence model (gpt-mini, gpt2, ...) trained with the flags a new
// user leaves out gets sizes that fit a language model in place of the image classifiers'
// (docs/training.md, "Language-model defaults"): up to 2,048 tokens a batch (8 windows of 256,
// 2 of 1,024), the evaluation batch following the training batch, and a --max-steps run warming up for a tenth of its steps (at most 100). A
// flag given on the command line, in --config or recorded by the checkpoint of --resume keeps
// its value.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "tandem/nn/models.h"

namespace tandem::tools {

namespace {

// Gives `flag` the value `value` when nothing gave it one (the resolved configuration then
// records it like a given flag).
void set_unless_given(CLI::App* c, const char* flag, const std::string& value) {
  CLI::Option* opt = c->get_option(flag);
  if (opt->count() > 0) return;
  opt->add_result(value);
  opt->run_callback();
}

}  // namespace

void apply_sequence_defaults(CLI::App* c, train::TrainConfig& cfg) {
  const bool sequence = nn::is_sequence_model(cfg.model);
  if (sequence) {
    // Up to 2,048 tokens a batch: 8 windows of gpt-mini's 256 (at most 8), 2 of GPT-2's 1,024.
    const int64_t block = cfg.block_size > 0 ? cfg.block_size : nn::sequence_block_size(cfg.model);
    set_unless_given(c, "--batch-size", std::to_string(std::clamp<int64_t>(2048 / block, 1, 8)));
    if (cfg.max_steps > 0 && c->get_option("--warmup-epochs")->count() == 0)
      set_unless_given(c, "--warmup-steps", std::to_string(std::min<int64_t>(100, cfg.max_steps / 10)));
  }
  // The evaluation batch follows the training batch where memory counts: a language model's
  // (its logits are batch x block x vocabulary) and any run under --device-memory-budget.
  if (sequence || !cfg.device_memory_budget.empty())
    set_unless_given(c, "--eval-batch-size", std::to_string(std::min(cfg.eval_batch_size, cfg.batch_size)));
}

}  // namespace tandem::tools
