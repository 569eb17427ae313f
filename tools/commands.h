// Sub-commands of the `tandem` program.
#pragma once

#include <CLI/CLI.hpp>

#include "tandem/train/config.h"
#include "tandem/train/trainer.h"

namespace tandem::tools {

/// Every sub-command of `tandem` (train, eval, info, show-batch, pack, tokenize, inspect,
/// report, serve) with its flags, bound to `cfg` and to the commands' own flag structs.
void add_commands(CLI::App& app, train::TrainConfig& cfg);
/// --data, --dataset, --label, --val-split, --skip-corrupt and, with `with_transforms`,
/// --image-size, --resize-size, --mean, --std (tools/data_options.cpp).
void add_data_options(CLI::App* c, train::TrainConfig& cfg, bool with_transforms);
void add_train_command(CLI::App& app, train::TrainConfig& cfg);
void add_eval_command(CLI::App& app, train::TrainConfig& cfg);
/// eval and serve: when --model is not given, the model recorded in the --weights file (tandem
/// writes its name in the metadata); otherwise, and for files without it, --model's value.
void model_from_weights_unless_given(CLI::App* c, train::TrainConfig& cfg);
void add_info_command(CLI::App& app);
void add_show_batch_command(CLI::App& app, train::TrainConfig& cfg);
int run_show_batch(const train::TrainConfig& cfg);
/// `tandem pack SRC OUT` (tools/pack_command.cpp) and `tandem inspect --data DIR`
/// (tools/inspect_command.cpp); their flags live in those files.
void add_pack_command(CLI::App& app);
/// `tandem tokenize`: a SentencePiece tokenizer and token shards from a text corpus
/// (tools/tokenize_command.cpp).
void add_tokenize_command(CLI::App& app);
int run_tokenize_command();

/// `tandem generate --weights F --prompt TEXT`: text from GPT weights (tools/generate_command.cpp).
void add_generate_command(CLI::App& app);
int run_generate_command();

void add_inspect_command(CLI::App& app);
int run_pack_command();
int run_inspect_command();
/// `tandem checkpoint consolidate SRC OUT` (tools/checkpoint_command.cpp).
void add_checkpoint_command(CLI::App& app);
int run_checkpoint_command();
/// `tandem report RUN.jsonl [--trace T.json] --out report.html` (tools/report_command.cpp).
void add_report_command(CLI::App& app);
int run_report_command();
/// --recompute, --activations-device, --device-memory-budget, --max-pinned-gb, --plan-only
/// (tools/memory_options.cpp).
void add_memory_options(CLI::App* c, train::TrainConfig& cfg);
/// --precision, --loss-scale, --loss-scale-init, --clip-grad-norm (tools/precision_options.cpp).
void add_precision_options(CLI::App* c, train::TrainConfig& cfg);
/// --checkpoint-dir, --checkpoint-every, --keep-checkpoints, --resume, --force
/// (tools/checkpoint_options.cpp), and what train prints of checkpoints and of a stopped run.
void add_checkpoint_options(CLI::App* c, train::TrainConfig& cfg);
/// After parsing: --resume without a value becomes --checkpoint-dir (CLI::ValidationError without
/// it).
void resolve_resume(CLI::App* c, train::TrainConfig& cfg);
/// After resolve_resume: a --resume run that does not restate the run (no --model, no --data)
/// takes the configuration its checkpoint recorded for every flag not given on the command
/// line or in --config (the run goes on as it began); a checkpoint whose header cannot be read
/// adopts nothing (the resume itself says what is wrong).
void adopt_recorded_config(CLI::App* c, train::TrainConfig& cfg);
/// After adopt_recorded_config: a sequence model (--model gpt-mini, gpt2, ...) takes language-
/// model defaults for the flags still unset (tools/sequence_defaults.cpp, docs/training.md).
void apply_sequence_defaults(CLI::App* c, train::TrainConfig& cfg);
void print_checkpoint(const train::CheckpointReport& report);
void print_checkpoint_summary(const train::TrainResult& result);
/// After fit() returned early on a stop signal: says where it stopped and returns 128 + signal.
int finish_stopped(const train::TrainConfig& cfg, const train::TrainResult& result);
/// Makes every option of `c` refuse empty values and non-decimal or out-of-range integers.
void strict_values(CLI::App* c);
/// Runs the sub-command the user chose; returns the exit code.
int run_selected(CLI::App& app, const train::TrainConfig& cfg);

}  // namespace tandem::tools
