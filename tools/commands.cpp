#include "commands.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config_file.h"
#include "run_watch.h"
#include "serving.h"
#include "tandem/comm/communicator.h"
#include "tandem/device_traits.h"
#include "tandem/profile/profiler.h"
#include "tandem/profile/summary.h"
#include "tandem/safetensors.h"
#include "tandem/thread_pool.h"
#include "tandem/train/info.h"
#include "tandem/train/memory_plan.h"
#include "tandem/train/progress.h"
#include "tandem/train/stop.h"
#include "tandem/train/trainer.h"

namespace tandem::tools {

// "auto" for --num-workers and --prefetch-factor: -1 in TrainConfig.
static const CLI::Transformer kAuto(std::map<std::string, std::string>{{"auto", "-1"}});

// CLI11 2.1 reads an empty value as 0, an integer with a leading 0 as octal ("--batch-size 064"
// is 52), saturates integers out of the 64-bit range and wraps "-1" into an unsigned one. Every
// option's value must therefore be non-empty, and an integer plain decimal within 64 bits (it is
// passed on without leading zeros; CLI11 still refuses values outside the option's own type).
// These transforms run before the options' own (CLI11 puts transforms first), so "auto" passes.
template <typename Int>
static std::string canonical_integer(std::string& v) {
  Int x{};
  const char* end = v.data() + v.size();
  const auto [ptr, ec] = std::from_chars(v.data(), end, x, 10);
  if (ec == std::errc::result_out_of_range)
    return fmt::format("expected an integer in [{}, {}], got {}", std::numeric_limits<Int>::min(),
                       std::numeric_limits<Int>::max(), v);
  if (ec != std::errc() || ptr != end)
    return fmt::format("expected a decimal integer{}, got '{}'", std::is_signed_v<Int> ? "" : " >= 0", v);
  v = fmt::format("{}", x);
  return "";
}

void strict_values(CLI::App* c) {
  for (CLI::Option* opt : c->get_options()) {
    if (opt->get_type_size_max() == 0) continue;  // a flag: takes no value
    const std::string type = opt->get_type_name().substr(0, opt->get_type_name().find(':'));
    opt->transform(CLI::Validator(
        [type](std::string& v) -> std::string {
          if (v.empty()) return "expected a value, got an empty string";
          if (v == "auto") return "";  // --num-workers and --prefetch-factor map it next
          if (type == "INT") return canonical_integer<int64_t>(v);
          if (type == "UINT") return canonical_integer<uint64_t>(v);
          return "";
        },
        ""));
  }
}

static void add_common(CLI::App* c, train::TrainConfig& cfg) {
  add_data_options(c, cfg, true);
  c->add_option("--model", cfg.model,
                "Model: fmnist-cnn, mlp, resnet18, resnet34, resnet50, resnet18-cifar (images) or gpt2, "
                "gpt2-medium, gpt2-large, gpt2-xl, gpt-mini (token data: --data a folder with train.tok, val.tok)")
      ->capture_default_str();
  c->add_option("--threads", cfg.threads, "Compute threads (0 = all available cores)")->capture_default_str();
  c->add_option("--device", cfg.device, "Device: cpu, cuda[:N] or virt[:N][?speed=S&bw=GBps&latency_us=U&memory_mb=M]; throughput planning "
                "(is the input fast enough for a GPU?): virt:0?tflops=T[&gbps=B]&compute=none")
      ->capture_default_str();
  c->add_option("--num-workers", cfg.num_workers,
                "Data-loading threads (0 = load in the training thread; auto = tuned from measured stage times "
                "within the available cores)")
      ->transform(kAuto)
      ->capture_default_str();
}

// A GPT of any size: these replace the named model's sizes (0 = the name's).
static void add_gpt_sizes(CLI::App* c, train::TrainConfig& cfg) {
  c->add_option("--n-layer", cfg.n_layer, "GPT models: transformer blocks (0 = the --model's)")
      ->capture_default_str();
  c->add_option("--n-head", cfg.n_head,
                "GPT models: attention heads, dividing --n-embd (0 = the --model's)")
      ->capture_default_str();
  c->add_option("--n-embd", cfg.n_embd, "GPT models: width (0 = the --model's)")
      ->capture_default_str();
  c->add_option("--block-size", cfg.block_size,
                "GPT models: tokens per window and positions (n_positions; 0 = the --model's)")
      ->capture_default_str();
  c->add_option("--vocab-size", cfg.vocab_size,
                "GPT models: rows of the token table, at least the token shards' vocabulary (e.g. 50304 for "
                "GPT-2's 50257, padded for speed; 0 = the shards')")
      ->capture_default_str();
}

static void add_seed(CLI::App* c, train::TrainConfig& cfg, const char* what) {
  c->add_option("--seed", cfg.seed, what)->capture_default_str();
}

void add_train_command(CLI::App& app, train::TrainConfig& cfg) {
  CLI::App* c = app.add_subcommand("train", "Train a model and report test accuracy after every epoch");
  add_common(c, cfg);
  add_seed(c, cfg, "Seed for initialisation, shuffling and augmentation");
  c->add_option("--epochs", cfg.epochs, "Passes over the training set")->capture_default_str();
  c->add_option("--max-steps", cfg.max_steps,
                "Run this many optimizer steps instead of --epochs (the schedule spans them; 0 = "
                "use --epochs)")
      ->capture_default_str();
  c->add_option("--eval-interval", cfg.eval_interval,
                "Evaluate on the validation (test) split before the first step and every this many "
                "optimizer "
                "steps, printed and in --metrics-file as \"eval\" records (0 = at epoch ends only)")
      ->capture_default_str();
  c->add_option("--grad-accum-steps", cfg.grad_accum_steps,
                "Micro-batches of --batch-size per optimizer step: gradients summed over them and "
                "scaled by 1/K "
                "(one step of K x --batch-size samples); the schedule counts optimizer steps")
      ->capture_default_str();
  c->add_option("--batch-size", cfg.batch_size,
                "Samples per training step and process: under mpirun -np N each rank takes this many, so the "
                "global batch is N times it (as PyTorch DDP)")
      ->capture_default_str();
  c->add_option("--eval-batch-size", cfg.eval_batch_size, "Samples per evaluation batch")->capture_default_str();
  c->add_option("--lr", cfg.lr, "Peak learning rate")->capture_default_str();
  c->add_option("--optimizer", cfg.optimizer, "Optimizer: sgd, adam or adamw")->capture_default_str();
  c->add_option("--optimizer-moments", cfg.optimizer_moments,
                "Adam's exp_avg and exp_avg_sq: fp32, or bf16 (half the bytes, stored with stochastic rounding; "
                "host optimizers: cpu, virt, or --param-device cpu)")
      ->capture_default_str();
  c->add_option("--weight-decay", cfg.weight_decay, "Weight decay (decoupled for adamw, L2 for adam and sgd)")
      ->capture_default_str();
  c->add_option("--momentum", cfg.momentum, "SGD momentum")->capture_default_str();
  c->add_flag("--nesterov", cfg.nesterov, "SGD with Nesterov momentum");
  c->add_option("--devices", cfg.devices,
                "Split each step's batch between these devices (e.g. cuda:0,cpu or virt:0,virt:1): a replica of the "
                "model on each, gradients combined weighted by samples on the first, one optimizer there; "
                "BatchNorm statistics per device (replaces --device)");
  c->add_option("--split", cfg.split,
                "With --devices: auto (parts follow each device's measured speed) or one weight per device, e.g. 3,1")
      ->capture_default_str();
  c->add_option("--place", cfg.place,
                "Static placement of modules: PREFIX=DEVICE,... (state_dict names of the modules the forward chains; "
                "each listed module and those after it, up to the next one listed, go to DEVICE), e.g. 9=cpu puts "
                "the classifier of fmnist-cnn on the cpu, layer4=cpu resnet18's layer4 and fc; a prefix inside a "
                "layer (layer3.1) cuts it; the rest stay on --device");
  c->add_flag("--no-decay-bn-bias", cfg.no_decay_bn_bias,
              "No weight decay on 1-d parameters: BatchNorm weights and biases and every bias");
  c->add_flag("--zero-init-residual", cfg.zero_init_residual,
              "ResNets: start each residual block's last BatchNorm weight at 0 (torchvision's zero_init_residual)");
  add_gpt_sizes(c, cfg);
  c->add_option(
      "--init", cfg.init,
      "Start from the weights in this safetensors file (tandem --save, a torchvision state_dict or "
      "a "
      "transformers GPT2LMHeadModel's model.safetensors): names and shapes must match the model's");
  c->add_option("--init-exclude", cfg.init_exclude,
                "State-dict name prefix not taken from --init (repeatable), e.g. fc. to keep a fresh classifier");
  c->add_option("--optimizer-device", cfg.optimizer_device,
                "Where the optimizer runs: device (beside the parameters) or cpu (ZeRO-Offload style: fp32 master "
                "weights and moments in pinned host memory, SIMD kernels, gradients and parameters copied per "
                "bucket while backward runs)")
      ->capture_default_str();
  c->add_option("--bucket-cap-mb", cfg.bucket_cap_mb,
                "MiB of fp32 gradient per bucket: the transfer buckets of --optimizer-device cpu and, under "
                "mpirun, the all-reduce buckets (the first one 1 MiB, as PyTorch DDP)")
      ->capture_default_str();
  c->add_option("--dist-timeout", cfg.dist_timeout,
                "With several ranks (mpirun, srun, torchrun): seconds a rank waits for the others in one "
                "collective (and for the tcp rendezvous) before it stops with an error naming the rank that did "
                "not answer")
      ->capture_default_str();
  c->add_option("--grad-compression", cfg.grad_compression,
                "Under mpirun: gradients on the wire as none (f32), fp16, bf16 (half the bytes) or topk:RATIO "
                "(only the largest RATIO of each bucket as index/value pairs; the rest is kept per rank and "
                "added to the next step's gradient)")
      ->capture_default_str();
  c->add_option("--zero", cfg.zero,
                "Under mpirun: 1 partitions the optimizer state over the ranks (ZeRO stage 1: each rank "
                "updates the parameters it owns, then broadcasts them; with --optimizer-device cpu each rank's "
                "CPU optimizer updates its block of every bucket, ZeRO-Offload's layout); 3 with --param-device cpu "
                "shards the streamed parameters' master values, gradients and optimizer state (ZeRO stage 3: "
                "blocks all-gathered before use, gradients reduce-scattered); 0 = every rank holds all of it")
      ->capture_default_str();
  c->add_option("--offload-delay", cfg.offload_delay,
                "With --optimizer-device cpu or --param-device cpu: 1 overlaps the CPU update of step t with "
                "forward and backward of step t+1 (gradients then come from parameters one update old); 0 = no "
                "delay")
      ->capture_default_str();
  c->add_option("--offload-delay-warmup", cfg.offload_delay_warmup,
                "With --offload-delay 1: the first this many steps run without delay (the ZeRO-Offload paper "
                "warms up before delaying)")
      ->capture_default_str();
  add_memory_options(c, cfg);
  add_precision_options(c, cfg);
  c->add_option("--save-dtype", cfg.save_dtype,
                "dtype of the tensors --save writes: fp32 (the master weights) or bf16")
      ->capture_default_str();
  c->add_option("--simd", cfg.simd,
                "SIMD level of the optimizer kernels: scalar, avx2 or avx512 (default: TANDEM_SIMD, else the "
                "best this CPU has)");
  c->add_option("--beta1", cfg.beta1, "Adam beta1")->capture_default_str();
  c->add_option("--beta2", cfg.beta2, "Adam beta2")->capture_default_str();
  c->add_option("--eps", cfg.eps, "Adam epsilon (added after bias correction)")->capture_default_str();
  c->add_option("--schedule", cfg.schedule,
                "Learning-rate schedule: constant, step (x gamma every --step-size epochs), cosine "
                "(linear warmup, then cosine decay to 0) or one-cycle (torch OneCycleLR: cosine from lr/25 "
                "up to --lr over --pct-start of the steps, then down to lr/25e4)")
      ->capture_default_str();
  c->add_option("--warmup-epochs", cfg.warmup_epochs, "Linear warmup length for cosine, in epochs")
      ->capture_default_str();
  c->add_option("--warmup-steps", cfg.warmup_steps,
                "Linear warmup length for cosine, in optimizer steps (instead of --warmup-epochs; "
                "for --max-steps runs)");
  c->add_option("--pct-start", cfg.pct_start, "One-cycle: share of the steps spent rising to --lr, in (0, 1)")
      ->capture_default_str();
  c->add_option("--step-size", cfg.step_size_epochs, "Step schedule: epochs between decays")->capture_default_str();
  c->add_option("--gamma", cfg.gamma, "Step schedule: decay factor")->capture_default_str();
  c->add_option("--label-smoothing", cfg.label_smoothing, "Cross-entropy label smoothing in [0, 1)")
      ->capture_default_str();
  c->add_option("--prefetch-factor,--prefetch", cfg.prefetch_factor,
                "Batches in flight per loader worker (auto = tuned, together with the batches copied ahead "
                "to a device)")
      ->transform(kAuto)
      ->capture_default_str();
  c->add_option("--save", cfg.save,
                "Write the trained weights (BatchNorm running statistics included) to this safetensors "
                "file, with the names of the equivalent PyTorch model's state_dict (torchvision's for the ResNets)");
  // A callback, not a "!" flag: CLI11 would show the negated default as "--no-augment{false}".
  c->add_flag_callback(
      "--no-augment", [&cfg] { cfg.augment = false; }, "Disable random crop and flip");
  c->add_option("--trace", cfg.trace,
                "Record every stage (wait for data, forward, backward, optimizer) and write a Chrome-trace "
                "JSON file (opens in Perfetto or chrome://tracing); also prints where the time went");
  c->add_option("--log-interval", cfg.log_interval,
                "Steps between asynchronous read-backs of the loss and accuracy (K): the step loop waits for "
                "the device only there, for the read-back K steps back, so it runs at most 2K steps ahead; "
                "a NaN loss stops the run within 2K steps")
      ->capture_default_str();
  c->add_option("--metrics-file", cfg.metrics_file,
                "Write one JSON object per line: per read-back window (loss, accuracy, lr, images/s, data-wait "
                "share) and per epoch (train and test figures, pool high-water marks, utilisation), flushed as "
                "written; `tandem report` plots it");
  c->add_option("--tensorboard", cfg.tensorboard,
                "Write TensorBoard event files with the same scalars into this folder (tensorboard --logdir)");
  c->add_flag("--show-utilization", cfg.show_utilization,
              "Show CPU busy share, the loader workers' share and device memory (GPU via NVML) in the epoch line");
  c->add_option("--progress", cfg.progress, "Live progress bar: 1 on, 0 off, -1 when stdout is a terminal")
      ->capture_default_str();
  add_checkpoint_options(c, cfg);
  c->add_option("--serve", serving_flags().serve,
                "Serve the model over HTTP while it trains, on HOST:PORT (port 0: any free port); see `tandem serve`");
  c->add_option("--publish-every", serving_flags().publish_every,
                "With --serve: steps between publishing the weights to the server (also after each evaluation)")
      ->capture_default_str();
  c->add_option("--online-mix", cfg.online_mix,
                "With --serve: share of each training batch drawn from the samples POSTed to /v1/samples")
      ->capture_default_str();
  c->add_option("--online-buffer", serving_flags().online_buffer,
                "With --serve: samples the online buffer holds (the oldest are replaced)")
      ->capture_default_str();
  add_serving_options(c);
  add_run_file_options(c);
  strict_values(c);
  // After the command line: the run file fills what it did not give, then the resolved
  // configuration is recorded (--print-config, checkpoints).
  c->callback([c, &cfg] {
    if (!run_file_flags().config.empty()) apply_run_file(c, run_file_flags().config);
    resolve_resume(c, cfg);
    adopt_recorded_config(c, cfg);  // --resume: the checkpoint's flags where none are given
    apply_sequence_defaults(c, cfg);
    cfg.run_config = resolved_config(c);
  });
}

void model_from_weights_unless_given(CLI::App* c, train::TrainConfig& cfg) {
  c->parse_complete_callback([c, &cfg] {
    if (c->count("--model") > 0 || cfg.weights.empty()) return;
    std::map<std::string, std::string> metadata;
    try {
      load_safetensors(cfg.weights, &metadata);
    } catch (const Error&) {
      return;  // the command's own load names what is wrong with the file
    }
    const auto it = metadata.find("model");
    if (it != metadata.end()) cfg.model = it->second;  // an unknown name is refused by the load
  });
}

void add_eval_command(CLI::App& app, train::TrainConfig& cfg) {
  CLI::App* c = app.add_subcommand("eval", "Evaluate a safetensors weights file on the test set");
  add_common(c, cfg);
  add_seed(
      c, cfg,
      "Seed of the model built before --weights replaces its values (no effect on the result: the "
      "test set is read in order, without augmentation)");
  c->add_option("--weights", cfg.weights, "safetensors file written by `tandem train --save` or by PyTorch")
      ->required();
  c->add_option("--batch-size", cfg.eval_batch_size, "Samples per evaluation batch")->capture_default_str();
  model_from_weights_unless_given(c, cfg);
  strict_values(c);
}

void add_info_command(CLI::App& app) {
  app.add_subcommand("info", "List devices, backend versions and the CPU's SIMD level");
}

// --skip-corrupt: the epoch's skipped samples, one line each after a count.
static void print_skipped(const train::EpochStats& s) {
  for (const auto* list : {&s.skipped_train, &s.skipped_test}) {
    if (list->empty()) continue;
    fmt::print("  skipped {} corrupt {} sample{}:\n", list->size(), list == &s.skipped_train ? "training" : "test",
               list->size() == 1 ? "" : "s");
    for (const std::string& line : *list) fmt::print("    {}\n", line);
  }
}

// A figure, or "n/a" when it was not computed (NaN: a device that does not compute).
static std::string figure(double v, const char* format) {
  return std::isnan(v) ? std::string("n/a") : fmt::format(fmt::runtime(format), v);
}

// Under mpirun: rank r > 0 writes its trace next to rank 0's, as <stem>.rank<r><ext>.
static std::string rank_trace_path(const std::string& trace, int rank) {
  if (rank == 0 || trace.empty()) return trace;
  const size_t dot = trace.rfind('.'), slash = trace.rfind('/');
  const bool ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return ext ? fmt::format("{}.rank{}{}", trace.substr(0, dot), rank, trace.substr(dot))
             : fmt::format("{}.rank{}", trace, rank);
}

// A rank other than 0: the same training, silent; its trace (if asked) goes to its own file.
static int run_train_rank(const train::TrainConfig& cfg, const comm::CommunicatorPtr& world) {
  train::Trainer trainer(cfg, nullptr, nullptr, world);
  train::TrainCallbacks cb;
  // --serve with --zero 3: rank 0's publishing gathers the weights from every rank's shards.
  if (!serving_flags().serve.empty() && cfg.zero == 3) follow_publishing(trainer, cb);
  if (!cfg.trace.empty()) {
    profile::Profiler::global().name_this_thread("train");
    profile::Profiler::global().set_enabled(true);
  }
  const train::TrainResult r = trainer.fit(cb);
  if (!cfg.trace.empty()) {
    profile::Profiler::global().set_enabled(false);
    profile::Profiler::global().write_chrome_trace(rank_trace_path(cfg.trace, world->rank()));
  }
  // A stop is agreed by every rank: rank 0 writes its checkpoint and reports it before any rank
  // ends with the signal's status (mpirun aborts the others at the first non-zero exit).
  if (r.stopped_by != 0) world->barrier(host_stream());
  return r.stopped_by != 0 ? 128 + r.stopped_by : 0;
}

// The communication line of a distributed run's summary.
static void print_comm_summary(const train::TrainResult& r) {
  if (r.world_size <= 1) return;
  fmt::print("distributed: {} ranks; {} {:.2f} ms/step on rank 0, {}; {:.2f} ms/step waiting for "
             "the slowest rank (skew, not counted above); {:.4f} MiB on the wire per step and rank ({:.2f}% of the f32 gradients)\n",
             r.world_size, r.comm_kind, 1e3 * r.comm_seconds_per_step,
             std::isnan(r.comm_hidden_share) ? std::string("hidden share not measured (on --device cpu the all-reduce runs inline in backward; "
                                                         "with --optimizer-device cpu or --param-device cpu on the host update thread)")
                                             : fmt::format("{:.2f} of it hidden behind {}", r.comm_hidden_share,
                                                           r.comm_kind == "gradient all-reduce" ? "backward"
                                                                                                : "the device's work"),
             1e3 * r.comm_skew_seconds_per_step, r.wire_bytes_per_step / (1024.0 * 1024.0),
             100.0 * r.wire_share);
}

// --plan-only: the memory plan, then whether it fits (the refusal's line), no training.
static int run_plan_only(const train::TrainConfig& cfg) {
  const train::MemoryPlan plan = train::plan_training(cfg);
  fmt::print("{}", train::format_memory_plan(plan));
  std::fflush(stdout);
  train::check_memory_plan(plan);  // throws Error(out_of_memory): exit 1 with the numbers
  fmt::print("the plan fits\n");
  return 0;
}

static int run_train(const train::TrainConfig& flags) {
  // mpirun, srun, torchrun: one rank per process; only rank 0 prints, saves and writes summaries.
  // Ctrl-C, SIGTERM: stop after the step, with a checkpoint. Before MPI starts its threads, so
  // that none of them takes the signals' default action (the process would just die).
  const train::StopSignals stop_signals;
  comm::CommunicatorPtr world;
  train::TrainConfig cfg = flags;
  if (const comm::LaunchInfo launch = comm::launch_info(); launch.world_size > 1) {
    world = comm::launched_world(cfg.dist_timeout);  // mpirun's MPI, or tcp at MASTER_ADDR (torchrun, srun)
    if (cfg.device == "cuda") cfg.device = fmt::format("cuda:{}", launch.local_rank);  // a GPU per rank
  }
  if (world && world->rank() != 0) {
    const int code = run_train_rank(cfg, world);
    comm::mpi_exit_cleanly();
    return code;
  }
  const bool live = cfg.progress < 0 ? ::isatty(STDOUT_FILENO) != 0 : cfg.progress > 0;
  train::ProgressBar bar(stdout, live);
  TD_CHECK_ARG(cfg.online_mix == 0 || !serving_flags().serve.empty(), "train",
               "--online-mix {}: expected --serve too (the samples come from POST /v1/samples)", cfg.online_mix);
  if (!serving_flags().serve.empty()) {  // said before the data is read, under its own name
    std::string host;
    int port = 0;
    serve::parse_listen(serving_flags().serve, "--serve", host, port);
  }
  train::Trainer trainer(cfg, nullptr, nullptr, world);
  fmt::print("{}\n", trainer.describe());
  if (const train::MemoryPlan* plan = trainer.memory_plan())
    fmt::print("{}", train::format_memory_plan(*plan));
  std::fflush(stdout);  // the banner reaches a log file before training starts
  std::unique_ptr<TrainServing> serving;  // --serve
  if (!serving_flags().serve.empty()) {
    serving_flags().options.listen = serving_flags().serve;
    serving = std::make_unique<TrainServing>(trainer, cfg);
  }
  // Throughput planning: said first, and the profile summary is printed without --trace too.
  const std::string& planning = trainer.planning_note();
  if (!planning.empty()) fmt::print("{}\n", planning);
  const bool profiled = !cfg.trace.empty() || !planning.empty();
  std::fflush(stdout);
  std::unique_ptr<RunWatch> watch;  // --metrics-file, --tensorboard, --show-utilization
  if (RunWatch::wanted(cfg))
    watch = std::make_unique<RunWatch>(
        cfg, trainer.describe(),
        trainer.memory_plan() ? train::memory_plan_json(*trainer.memory_plan()) : "");
  // Throughput: img/s for images, samples/s otherwise, and tokens/s for token inputs.
  const std::string unit = data::image_input(trainer.fields()) ? "img/s" : "samples/s";
  const auto rate = [&unit](double samples_per_s, double tokens_per_s) {
    return fmt::format("{:.0f} {}", samples_per_s, unit) +
           (tokens_per_s > 0 ? fmt::format(", {:.0f} tokens/s", tokens_per_s) : "");
  };
  bar.set_unit(unit);
  bar.count_steps(cfg.max_steps);
  train::TrainCallbacks cb;
  cb.on_epoch_begin = [&](int epoch, int64_t steps) { bar.begin_epoch(epoch, cfg.epochs, steps); };
  cb.on_step = [&](int64_t step, double loss, int64_t samples) { bar.update(step, loss, samples); };
  cb.on_eval = [&](const train::EvalPoint& e) {
    bar.clear();
    fmt::print("step {}: val_loss {}  val_acc {}\n", e.global_step, figure(e.loss, "{:.4f}"),
               figure(100 * e.accuracy, "{:.2f}%"));
    std::fflush(stdout);
  };
  cb.on_epoch_end = [&](const train::EpochStats& s) {
    bar.clear();
    const std::string scaling =
        s.loss_scaled ? fmt::format("  loss_scale {:g} skipped {}", s.loss_scale, s.skipped_steps) : "";
    fmt::print("epoch {}  train_loss {}  train_acc {}  test_loss {}  test_acc {}  {}  {:.1f} s{}{}\n",  // N/total; N with --max-steps
               cfg.max_steps > 0 ? std::to_string(s.epoch) : fmt::format("{}/{}", s.epoch, cfg.epochs), figure(s.train_loss, "{:.4f}"), figure(100 * s.train_accuracy, "{:.2f}%"),
               figure(s.test_loss, "{:.4f}"), figure(100 * s.test_accuracy, "{:.2f}%"),
               rate(s.samples_per_s, s.tokens_per_s), s.seconds,
               scaling + (s.split.empty() ? "" : "  split " + train::format_shares(s.split)), watch ? watch->epoch_suffix() : "");
    print_skipped(s);
    std::fflush(stdout);
  };
  if (watch) watch->attach(cb);
  if (profiled) {
    profile::Profiler::global().name_this_thread("train");
    profile::Profiler::global().set_enabled(true);
  }
  cb.on_checkpoint = [&](const train::CheckpointReport& c) {
    bar.clear();
    print_checkpoint(c);
  };
  if (serving) serving->attach(cb);
  train::TrainResult r = trainer.fit(cb);
  if (serving) serving->finish();
  if (r.stopped_by != 0 || r.epochs.empty()) {
    const int code = finish_stopped(cfg, r);
    if (r.stopped_by == 0 && !cfg.save.empty()) {  // resumed at the end: the checkpoint's weights are the run's
      trainer.save_weights(cfg.save);
      fmt::print("saved weights to {}\n", cfg.save);
    }
    if (world && r.stopped_by != 0) world->barrier(host_stream());
    if (world) comm::mpi_exit_cleanly();
    return code;
  }
  if (!r.autotune.empty()) fmt::print("{}\n", r.autotune);
  // The weights first: a trace that cannot be written must not cost the trained model.
  if (!cfg.save.empty()) {
    trainer.save_weights(cfg.save);
    fmt::print("saved weights to {}\n", cfg.save);
    std::fflush(stdout);
  }
  if (profiled) {
    profile::Profiler::global().set_enabled(false);
    const profile::Summary summary = profile::summarize(train::summary_options(cfg, r));
    fmt::print("{}", summary.text());
    print_comm_summary(r);
    if (watch) watch->finish(r, &summary);
  } else if (watch) {
    watch->finish(r, nullptr);
  }
  if (!profiled) print_comm_summary(r);
  if (!r.disk.empty()) fmt::print("{}\n", r.disk);
  if (!cfg.trace.empty()) {
    profile::Profiler::global().write_chrome_trace(cfg.trace);
    fmt::print("wrote trace to {}\n", cfg.trace);
  }
  if (r.token_data)  // a language model: its validation loss, not a class accuracy
    fmt::print("done: final val_loss {}, wall {}, train {}\n", figure(r.epochs.back().test_loss, "{:.4f}"),
               train::format_duration(r.wall_seconds), rate(r.samples_per_s, r.tokens_per_s));
  else
    fmt::print("done: best test_acc {} (epoch {}), final test_acc {}, wall {}, train {}\n",
               figure(100 * r.best_test_accuracy, "{:.2f}%"), r.best_epoch,
               figure(100 * r.epochs.back().test_accuracy, "{:.2f}%"), train::format_duration(r.wall_seconds),
               rate(r.samples_per_s, r.tokens_per_s));
  if (!r.split.empty())
    fmt::print("split: {}; parts moved {} time{}, last step {}\n", train::format_shares(r.split), r.split_moves,
               r.split_moves == 1 ? "" : "s", fmt::join(r.split_parts.back(), " + "));
  if (const size_t peak = r.epochs.back().pinned_peak_bytes; peak > 0) {
    const size_t first = r.epochs.front().pinned_peak_bytes;
    constexpr double kMiB = 1024.0 * 1024.0;
    fmt::print("pinned pool high-water {:.1f} MiB ({})\n", static_cast<double>(peak) / kMiB,
               r.epochs.size() < 2 ? "one epoch"
               : peak == first    ? "flat after epoch 1"
                                  : fmt::format("grew from {:.1f} MiB after epoch 1", static_cast<double>(first) / kMiB));
  }
  print_checkpoint_summary(r);
  if (world) comm::mpi_exit_cleanly();
  // A stop signal during --save: the file was completed; still report the stop.
  return train::StopSignals::requested() ? 128 + train::StopSignals::requested() : 0;
}

static int run_eval(const train::TrainConfig& cfg) {
  train::EvalResult r = train::evaluate_weights(cfg);
  fmt::print("eval {}: test_loss {}  test_acc {} ({} / {})\n", cfg.weights, figure(r.loss, "{:.4f}"),
             figure(100 * r.accuracy, "{:.2f}%"), r.correct, r.samples);
  return 0;
}

// More compute threads than cores is allowed (to study contention) but spins them against each
// other: one epoch of the mlp went from about 1 s to 34 s with --threads 64 on 2 cores.
static void warn_oversubscribed(const train::TrainConfig& cfg) {
  if (cfg.threads > available_cores() && cfg.threads <= 1024)  // above 1024 validate() refuses it
    std::fprintf(stderr,
                 "tandem: warning: --threads %d is more than the %d available cores; the compute threads will "
                 "contend and run many times slower (0 = one per core)\n",
                 cfg.threads, available_cores());
}

void add_commands(CLI::App& app, train::TrainConfig& cfg) {
  add_train_command(app, cfg);
  add_eval_command(app, cfg);
  add_info_command(app);
  add_show_batch_command(app, cfg);
  add_pack_command(app);
  add_tokenize_command(app);
  add_inspect_command(app);
  add_report_command(app);
  add_serve_command(app, cfg);
  add_generate_command(app);
  add_checkpoint_command(app);
}

int run_selected(CLI::App& app, const train::TrainConfig& cfg) {
  if (app.got_subcommand("train") || app.got_subcommand("eval")) warn_oversubscribed(cfg);
  if (app.got_subcommand("train") && run_file_flags().print_config) {
    if (cfg.devices.empty() && cfg.place.empty())
      train::check_memory_plan(train::plan_training(cfg));  // the run's checks, its data read
    else
      train::validate(cfg, "train");
    fmt::print("{}", cfg.run_config);
    return 0;
  }
  if (app.got_subcommand("train")) return cfg.plan_only ? run_plan_only(cfg) : run_train(cfg);
  if (app.got_subcommand("eval")) return run_eval(cfg);
  if (app.got_subcommand("serve")) return run_serve(cfg);
  if (app.got_subcommand("show-batch")) return run_show_batch(cfg);
  if (app.got_subcommand("pack")) return run_pack_command();
  if (app.got_subcommand("tokenize")) return run_tokenize_command();
  if (app.got_subcommand("generate")) return run_generate_command();
  if (app.got_subcommand("inspect")) return run_inspect_command();
  if (app.got_subcommand("report")) return run_report_command();
  if (app.got_subcommand("checkpoint")) return run_checkpoint_command();
  if (app.got_subcommand("info")) {
    fmt::print("{}", train::system_info());
    return 0;
  }
  return 2;
}

}  // namespace tandem::tools
