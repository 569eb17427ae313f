// `tandem checkpoint consolidate SRC OUT`: one safetensors file from a sharded checkpoint
// (src/train/checkpoint/consolidate.h), shard by shard.
#include <chrono>

#include <fmt/format.h>

#include "commands.h"
#include "train/checkpoint/consolidate.h"

namespace tandem::tools {

namespace {
struct CheckpointFlags {
  std::string src, out;
  bool with_state = false;
};
CheckpointFlags& flags() {
  static CheckpointFlags f;
  return f;
}
}  // namespace

void add_checkpoint_command(CLI::App& app) {
  CheckpointFlags& f = flags();
  CLI::App* c = app.add_subcommand("checkpoint", "Work with checkpoints: consolidate a sharded one into one file");
  c->require_subcommand(1);
  CLI::App* k = c->add_subcommand(
      "consolidate",
      "Write a sharded checkpoint (--checkpoint-format sharded) as one safetensors file of the model's weights, as "
      "--save writes them (transformers' GPT2LMHeadModel loads a GPT's with strict=True), reading one shard at a "
      "time");
  k->add_option("SRC", f.src, "A step-<N>.shards folder, or a --checkpoint-dir folder (its newest sharded checkpoint)")
      ->required();
  k->add_option("OUT", f.out, "The safetensors file to write (replaced atomically)")->required();
  k->add_flag("--with-state", f.with_state,
              "Also the optimizer's state, the metrics and the loss scaler's state, under their checkpoint names");
  strict_values(k);
}

int run_checkpoint_command() {
  const CheckpointFlags& f = flags();
  const auto t0 = std::chrono::steady_clock::now();
  const train::checkpoint::ConsolidateReport r = train::checkpoint::consolidate_checkpoint(f.src, f.out, f.with_state);
  fmt::print("consolidated {} ({} shard{}) into {}: {} tensors, {:.1f} MiB in {:.2f} s\n", r.source, r.shards,
             r.shards == 1 ? "" : "s", f.out, r.tensors, static_cast<double>(r.bytes) / 1048576.0,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

}  // namespace tandem::tools
