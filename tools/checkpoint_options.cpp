// The train command's checkpoint flags and what it prints of checkpoints (tools/commands.h).
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "config_file.h"

namespace tandem::tools {

void add_checkpoint_options(CLI::App* c, train::TrainConfig& cfg) {
  c->add_option("--checkpoint-dir", cfg.checkpoint_dir,
                "Folder for checkpoints (weights, BatchNorm statistics, optimizer state, schedule and data "
                "position, flags), written in the background at every epoch's end, every --checkpoint-every "
                "steps and on Ctrl-C; latest.json names the newest complete one");
  c->add_option("--checkpoint-every", cfg.checkpoint_every,
                "With --checkpoint-dir: also checkpoint every this many steps (0 = at epoch ends only)")
      ->capture_default_str();
  c->add_option("--keep-checkpoints", cfg.keep_checkpoints, "With --checkpoint-dir: the newest checkpoints kept")
      ->capture_default_str();
  c->add_option("--checkpoint-format", cfg.checkpoint_format,
                "With --checkpoint-dir: whole (one file, rank 0 writes it), sharded (every rank writes its shard "
                "in parallel, with a manifest; resumable at another world size; `tandem checkpoint consolidate` "
                "makes one file of it) or auto (sharded for --zero 1 --optimizer-device cpu, else whole)")
      ->capture_default_str();
  c->add_option("--resume", cfg.resume,
                "Continue a run from a checkpoint file, or from the newest good one in a folder (no value: "
                "--checkpoint-dir; auto: --checkpoint-dir when it holds a checkpoint, else start afresh, for "
                "requeued jobs): the same batches and weights as if it had never stopped")
      ->expected(0, 1)
      ->default_str("");
  c->add_flag("--force", cfg.force, "With --resume: go on even when flags that change the math differ");
}

// Whether `dir` holds a checkpoint or its manifest (complete or not: --resume then verifies).
static bool holds_checkpoint(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == "latest.json" || (name.rfind("step-", 0) == 0 && name.find(".tmp-") == std::string::npos)) return true;
  }
  return false;
}

void resolve_resume(CLI::App* c, train::TrainConfig& cfg) {
  // --resume without a value continues from --checkpoint-dir; --resume auto too when that
  // holds a checkpoint, and starts afresh when it holds none (a requeued job's first run).
  CLI::Option* resume = c->get_option("--resume");
  if (cfg.resume == "auto") {
    if (cfg.checkpoint_dir.empty())
      throw CLI::ValidationError("--resume", "auto resumes from --checkpoint-dir: pass --checkpoint-dir too");
    cfg.resume = holds_checkpoint(cfg.checkpoint_dir) ? cfg.checkpoint_dir : "";
    resume->clear();
    if (!cfg.resume.empty()) resume->add_result(cfg.resume);
    return;
  }
  if (resume->count() == 0 || !cfg.resume.empty()) return;
  if (cfg.checkpoint_dir.empty())
    throw CLI::ValidationError(
        "--resume", "without a value it resumes from --checkpoint-dir: pass a folder or file");
  cfg.resume = cfg.checkpoint_dir;
  resume->clear();  // the resolved configuration names the folder
  resume->add_result(cfg.resume);
}

// The configuration the checkpoint `target` recorded (a file, or a folder's latest.json),
// read from its safetensors header alone; "" when there is none to read.
static std::string recorded_config(const std::string& target) {
  namespace fs = std::filesystem;
  using json = nlohmann::json;
  std::error_code ec;
  fs::path file(target);
  if (fs::is_directory(file, ec)) {
    std::ifstream in(file / "latest.json");
    const json latest = json::parse(in, nullptr, false);
    if (!latest.is_object() || !latest.contains("checkpoint") || !latest["checkpoint"].is_string()) return "";
    file /= latest["checkpoint"].get<std::string>();
  }
  std::ifstream in(file, std::ios::binary);
  uint64_t n = 0;  // safetensors: the header's length (little-endian), then the JSON header
  if (!in.read(reinterpret_cast<char*>(&n), sizeof n) || n > (uint64_t{64} << 20)) return "";
  std::string header(static_cast<size_t>(n), '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(n))) return "";
  const json h = json::parse(header, nullptr, false);
  if (!h.is_object() || !h.contains("__metadata__") || !h["__metadata__"].contains("state")) return "";
  const json& text = h["__metadata__"]["state"];
  const json state = text.is_string() ? json::parse(text.get<std::string>(), nullptr, false) : json();
  if (!state.is_object() || !state.contains("run_config") || !state["run_config"].is_string()) return "";
  return state["run_config"].get<std::string>();
}

void adopt_recorded_config(CLI::App* c, train::TrainConfig& cfg) {
  // A command that restates the run (its --model or --data) is checked against the recorded
  // flags instead (train/checkpoint/run_flags.h): every differing one named at once.
  if (cfg.resume.empty() || c->count("--model") > 0 || c->count("--data") > 0) return;
  const std::string recorded = recorded_config(cfg.resume);
  if (!recorded.empty()) apply_run_text(c, recorded, "--resume " + cfg.resume + " (its recorded configuration)");
}

void print_checkpoint(const train::CheckpointReport& c) {
  fmt::print("checkpoint {}{}: epoch {} step {}/{} (global step {}), step loop paused {:.2f} ms\n", c.path,
             c.stop ? " (stop)" : "", c.epoch, c.step, c.steps_in_epoch, c.global_step, c.pause_ms);
  std::fflush(stdout);
}

void print_checkpoint_summary(const train::TrainResult& r) {
  if (r.checkpoints == 0) return;
  fmt::print("checkpoints: {} written, step loop paused {:.2f} ms on average, {:.2f} ms at most\n", r.checkpoints,
             r.checkpoint_pause_mean_ms, r.checkpoint_pause_max_ms);
}

int finish_stopped(const train::TrainConfig& cfg, const train::TrainResult& r) {
  print_checkpoint_summary(r);
  if (r.stopped_by == 0) {  // resumed after the last epoch: nothing left to train
    fmt::print("done: nothing left to train (the checkpoint is at the run's end, {})\n",
               cfg.max_steps > 0 ? fmt::format("--max-steps {}", cfg.max_steps) : fmt::format("--epochs {}", cfg.epochs));
    return 0;
  }
  const char* name = r.stopped_by == SIGINT ? "SIGINT" : r.stopped_by == SIGUSR1 ? "SIGUSR1" : "SIGTERM";
  fmt::print("stopped by {} after the current step{}\n", name,
             cfg.checkpoint_dir.empty() ? " (no --checkpoint-dir: nothing saved)"
                                        : "; continue with --resume " + cfg.checkpoint_dir);
  std::fflush(stdout);
  return 128 + r.stopped_by;
}

}  // namespace tandem::tools
