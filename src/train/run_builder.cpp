#include "train/run_builder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tandem/data/image_fields.h"
#include "tandem/nn/gpt.h"
#include "tandem/nn/models.h"
#include "tandem/pinned.h"
#include "tandem/ops.h"
#include "tandem/optim/kernels.h"
#include "tandem/stream.h"
#include "tandem/thread_pool.h"
#include "train/dist/dist_setup.h"
#include "train/home/home_choice.h"
#include "train/home/homes.h"
#include "train/place/param_stream.h"
#include "train/place/activation_offload.h"
#include "train/place/offload_activations.h"
#include "train/place/place_model.h"
#include "train/place/placed_update.h"
#include "train/plan/plan_run.h"
#include "train/plan/planned_windows.h"
#include "train/precision_check.h"
#include "train/split/split_setup.h"
#include "train/token_data.h"
#include "train/weights.h"

namespace tandem::train {

void rethrow_naming_flag(const Error& e, const char* command, const char* flag,
                         const std::string& value) {
  std::string what = e.what();
  if (!what.empty() && what[0] == '[') what.erase(0, what.find("] ") + 2);  // drop "[op] "
  throw_error(e.code(), command, fmt::format("{} {}: {}", flag, value, what));
}

// Parses the device flag: cpu, virt[:N][?speed=..&bw=..&latency_us=..&memory_mb=..] (the
// virt device is configured from the options) or cuda[:N] (must exist: runtime_for throws
// "built without CUDA" / "no CUDA device found"). Every error names the flag.
Device resolve_device(const std::string& text, const char* command, const char* flag) {
  DeviceSpec spec;
  try {
    spec = DeviceSpec::parse(text);
    configure_device(spec);
    if (!spec.device.is_host()) runtime_for(spec.device);
  } catch (const Error& e) {
    rethrow_naming_flag(e, command, flag, text);
  }
  return spec.device;
}

void set_threads(int threads) { ops::set_num_threads(threads > 0 ? threads : available_cores()); }

TrainConfig pipeline_start(TrainConfig c) {
  if (c.num_workers < 0) c.num_workers = 1;
  if (c.prefetch_factor < 0) c.prefetch_factor = 2;
  return c;
}

nn::ModelSpec model_spec(const data::Dataset& set, const data::Transform& transform) {
  const data::ImageDims d = transform.output_dims(set.dims());
  return {d.channels, d.height, d.width, set.num_classes()};
}

// A stopped run (out of device memory mid-step, a NaN loss) leaves work queued on the default
// stream (the one the model's ops use); returning to exit() with it would let the stream
// thread run kernels while the libraries they call (oneDNN) destroy their static state: a
// crash after the error line.
void drain_device(Device device) noexcept {
  if (device.is_host()) return;
  try {
    runtime_for(device).default_stream(device.index).synchronize();
  } catch (...) {
  }
}

Run::~Run() { drain_device(device); }  // also when build_run throws after placing the model

DType precision_dtype(const std::string& precision) {
  if (precision == "bf16") return DType::bf16;
  if (precision == "fp16") return DType::f16;
  return DType::f32;
}

// The model is sized from the training set; the test set must match it.
static void check_same_samples(const data::Dataset& train, const data::Dataset& test, const std::string& where) {
  const data::ImageDims a = train.dims(), b = test.dims();
  TD_CHECK_ARG(a == b && train.num_classes() == test.num_classes(), "train",
               "the training and test sets differ{}: train holds {}x{}x{} images of {} classes, test {}x{}x{} "
               "images of {} classes; expected the same sample shape and classes",
               where, a.channels, a.height, a.width, train.num_classes(), b.channels, b.height, b.width,
               test.num_classes());
}

// Images: the sets (given, or opened from --data), their transforms, the model's spec and the
// image fields the feeds collate; the image Dataset lives on only behind those fields.
static void open_images(Run& r, std::shared_ptr<const data::Dataset> train_set,
                        std::shared_ptr<const data::Dataset> test_set) {
  const TrainConfig& cfg = r.cfg;
  TD_CHECK_ARG(cfg.n_layer == 0 && cfg.n_head == 0 && cfg.n_embd == 0 && cfg.block_size == 0, "train",
               "--n-layer, --n-head, --n-embd and --block-size size a GPT: expected token data (--data a folder "
               "with train.tok and val.tok), got images for --model {}",
               cfg.model);
  const bool from_dir = !train_set || !test_set;
  if (from_dir) r.format = dataset_options(cfg).format;
  if (!train_set) train_set = open_split(cfg, data::Split::train);
  if (!test_set) test_set = open_split(cfg, data::Split::test);
  check_same_samples(*train_set, *test_set, from_dir ? fmt::format(" (--data {})", cfg.data_dir) : "");
  r.transforms = make_transforms(*train_set, r.format, cfg);
  r.spec = model_spec(*train_set, *r.transforms.train);
  r.spec.zero_init_residual = cfg.zero_init_residual;
  const data::ImageDims d = train_set->dims();
  const std::string shape = d.height == 0 ? fmt::format("{}-channel images of varying size", d.channels)
                                          : fmt::format("{}x{}x{} images", d.channels, d.height, d.width);
  r.data_note = fmt::format("{}, {}, {} classes -> {}x{}x{}; training transform: {}{}",
                            r.format == data::DatasetFormat::detect ? "in memory" : data::format_name(r.format),
                            shape, train_set->num_classes(), r.spec.channels, r.spec.height, r.spec.width,
                            r.transforms.describe, cfg.skip_corrupt ? ", corrupt samples skipped" : "");
  r.image_card = make_model_card(*test_set, r.format, cfg);
  r.train_data = std::make_shared<data::ImageFields>(std::move(train_set), r.transforms.train, r.compute_dtype);
  r.test_data = std::make_shared<data::ImageFields>(std::move(test_set), r.transforms.eval, r.compute_dtype);
}

// The model is sized from the training set's samples; both feeds must yield that shape.
static void check_feed_dims(const BatchFeed& feed, const nn::ModelSpec& s, const char* which) {
  const std::vector<data::Field>& fields = feed.loader().fields();
  const int input = feed.loader().input_field();
  const Shape want{s.channels, s.height, s.width};
  TD_CHECK(input >= 0 && fields[static_cast<size_t>(input)].shape == want, ErrorCode::internal, "train",
           "the {} feed yields samples {} but the model is built for {}x{}x{} inputs", which,
           data::describe_fields(fields), s.channels, s.height, s.width);
}

// Token data: the splits as windows of the model's block size; what the run does not support
// yet is refused naming the flag.
static void open_token_data(Run& r) {
  const TrainConfig& cfg = r.cfg;
  const auto refuse = [&](bool bad, const char* flag, const std::string& value) {
    TD_CHECK_ARG(!bad, "train", "{} {}: not supported with token data (--data {}) yet", flag, value, cfg.data_dir);
  };
  TD_CHECK_ARG(nn::is_sequence_model(cfg.model), "train",
               "--model {}: --data {} holds token data, which needs a sequence model (expected one of {})", cfg.model,
               cfg.data_dir, fmt::join(nn::sequence_model_names(), ", "));
  refuse(cfg.shuffle != "full", "--shuffle", cfg.shuffle);
  refuse(cfg.label_smoothing != 0, "--label-smoothing", fmt::format("{}", cfg.label_smoothing));
  const int64_t block = cfg.block_size > 0 ? cfg.block_size : nn::sequence_block_size(cfg.model);
  const TokenSplits t = open_token_splits(cfg.data_dir, block);
  TD_CHECK_ARG(cfg.vocab_size == 0 || cfg.vocab_size >= t.vocab_size, "train",
               "--vocab-size {}: expected at least the token shards' vocabulary of {} (--data {})", cfg.vocab_size,
               t.vocab_size, cfg.data_dir);
  r.train_data = t.train;
  r.test_data = t.test;
  r.vocab_size = t.vocab_size;
  r.spec = nn::ModelSpec{0, 0, 0, cfg.vocab_size > 0 ? cfg.vocab_size : t.vocab_size, false, block};
  r.spec.n_layer = cfg.n_layer;
  r.spec.n_head = cfg.n_head;
  r.spec.n_embd = cfg.n_embd;
  r.spec.n_positions = cfg.block_size;
  r.data_note = fmt::format("token shards (train.tok, val.tok), a vocabulary of {} tokens, windows of {} tokens: {}",
                            r.vocab_size, r.spec.block_size, data::describe_fields(r.train_data->fields()));
}

static void build_feeds(Run& r, const TrainConfig& cfg, bool split) {
  // A split run takes host batches in pinned slots and copies each device's part itself.
  r.train_feed = make_train_feed(r.train_data, r.cfg, split ? Device{} : r.device, r.shard(), split);
  r.test_feed = make_test_feed(r.test_data, r.cfg, r.device, "train",
                               "test batches: lower --log-interval or --eval-batch-size", r.shard());
  if (r.token_data()) return;  // windows of the model's block size; the loader knobs as given
  check_feed_dims(*r.train_feed, r.spec, "training");
  check_feed_dims(*r.test_feed, r.spec, "test");
  if (cfg.num_workers < 0 || cfg.prefetch_factor < 0) {
    data::AutotuneOptions ao;
    ao.tune_workers = r.workers_autotuned = cfg.num_workers < 0;
    ao.tune_prefetch = cfg.prefetch_factor < 0;
    ao.cpu_budget = available_cores();
    r.tuner = std::make_unique<data::PipelineTuner>(r.train_feed->loader(), r.train_feed->prefetcher(), ao);
  }
}

// The names of the model, optimizer and schedule, checked before any data is loaded; errors
// name the flag.
static void check_names(const TrainConfig& cfg) {
  auto check = [](const char* flag, const std::string& value, void (*check_name)(const std::string&)) {
    try {
      check_name(value);
    } catch (const Error& e) {
      rethrow_naming_flag(e, "train", flag, value);
    }
  };
  check("--model", cfg.model, nn::check_model_name);
  check("--optimizer", cfg.optimizer, optim::check_optimizer_name);
  check("--schedule", cfg.schedule, optim::check_schedule_name);
  // The sequence model's sizes (ranges: validate()): only for a sequence model, heads dividing
  // the width.
  const std::pair<const char*, int64_t> sizes[] = {{"--n-layer", cfg.n_layer},
                                                   {"--n-head", cfg.n_head},
                                                   {"--n-embd", cfg.n_embd},
                                                   {"--block-size", cfg.block_size},
                                                   {"--vocab-size", cfg.vocab_size}};
  for (const auto& [flag, v] : sizes) {
    TD_CHECK_ARG(v == 0 || nn::is_sequence_model(cfg.model), "train",
                 "{} {}: only for a sequence model (--model {}), not {}", flag, v,
                 fmt::join(nn::sequence_model_names(), ", "), cfg.model);
  }
  if (nn::is_sequence_model(cfg.model)) {
    const nn::GptConfig named = nn::gpt_config(cfg.model, 1);
    const int64_t heads = cfg.n_head > 0 ? cfg.n_head : named.n_head;
    const int64_t width = cfg.n_embd > 0 ? cfg.n_embd : named.n_embd;
    TD_CHECK_ARG(width % heads == 0, "train", "--n-head {} --n-embd {}: expected the heads to divide the width ({})",
                 heads, width, cfg.model);
  }
}

int64_t warmup_steps(const TrainConfig& cfg, int64_t steps_per_epoch) {
  if (cfg.warmup_steps >= 0) return cfg.warmup_steps;
  const int64_t w = std::llround(cfg.warmup_epochs * static_cast<double>(steps_per_epoch));
  // A run counted in --max-steps shorter than the default warm-up takes a fifth of its steps
  // (a --warmup-epochs the user gave stays as given, and is refused when it does not fit).
  if (cfg.max_steps > 0 && w >= cfg.max_steps && cfg.warmup_epochs == TrainConfig{}.warmup_epochs)
    return cfg.max_steps / 5;
  return w;
}

// The schedule's options for epochs of `batches` training batches, and its refusals (also the
// dry runs': --plan-only and --print-config refuse what the run would).
static optim::ScheduleOptions schedule_options(const TrainConfig& cfg, int64_t batches) {
  const int64_t steps_per_epoch = batches / cfg.grad_accum_steps;
  TD_CHECK_ARG(steps_per_epoch >= 1, "train",
               "--grad-accum-steps {}: expected at most the {} training batches of an epoch "
               "(--batch-size {})",
               cfg.grad_accum_steps, batches, cfg.batch_size);
  optim::ScheduleOptions so;
  so.lr = cfg.lr;
  so.total_steps = cfg.max_steps > 0 ? cfg.max_steps : steps_per_epoch * cfg.epochs;
  so.warmup_steps = warmup_steps(cfg, steps_per_epoch);
  so.step_size = steps_per_epoch * cfg.step_size_epochs;
  so.gamma = cfg.gamma;
  so.pct_start = cfg.pct_start;
  TD_CHECK_ARG(cfg.schedule != "one-cycle" || so.total_steps >= 2, "train",
               "--schedule one-cycle: expected a run of at least 2 steps, got {}", so.total_steps);
  TD_CHECK_ARG(cfg.schedule != "cosine" || so.warmup_steps < so.total_steps, "train",
               "{}: expected fewer warmup steps than the run's {} steps ({}), got {} (set --warmup-steps)",
               cfg.warmup_steps >= 0 ? fmt::format("--warmup-steps {}", cfg.warmup_steps)
                                     : fmt::format("--warmup-epochs {}", cfg.warmup_epochs),
               so.total_steps,
               cfg.max_steps > 0 ? fmt::format("--max-steps; epochs of {} steps", steps_per_epoch)
                                 : fmt::format("{} epochs of {}", cfg.epochs, steps_per_epoch),
               so.warmup_steps);
  return so;
}

static void build_schedule(Run& r, const TrainConfig& cfg) {
  r.schedule = optim::make_schedule(cfg.schedule, schedule_options(cfg, r.train_feed->loader().num_batches()));
}

// The data sets and the model spec (no model yet).
static void open_data(Run& r, const TrainConfig& cfg,
                      std::shared_ptr<const data::Dataset> train_set,
                      std::shared_ptr<const data::Dataset> test_set) {
  r.compute_dtype = precision_dtype(cfg.precision);  // the image fields' dtype
  std::error_code ec;
  TD_CHECK_ARG(train_set || test_set || !nn::is_sequence_model(cfg.model) || std::filesystem::exists(cfg.data_dir, ec),
               "train",
               "--data {}: cannot open data directory: no such folder (--model {} trains on token shards, "
               "train.tok and val.tok: tandem tokenize writes them)",
               cfg.data_dir, cfg.model);
  const bool tokens = !train_set && !test_set && is_token_data(cfg.data_dir);
  // A language model's data is token shards: say so, not which image formats were looked for.
  TD_CHECK_ARG(tokens || train_set || test_set || !nn::is_sequence_model(cfg.model), "train",
               "--data {}: no train.tok in it: model {} is a language model and expects token shards (tandem "
               "tokenize --corpus FILE --out DIR writes them; docs/language-models.md)",
               cfg.data_dir, cfg.model);
  if (tokens) {
    open_token_data(r);
  } else {
    open_images(r, std::move(train_set), std::move(test_set));
  }
}

// The memory flags plan one device's run; --devices and --place are not planned yet (recompute
// and CPU-held activations are per block: each replica, each placed block does its own).
static void check_plan_flags(const TrainConfig& cfg) {
  const char* flag = !cfg.devices.empty() ? "--devices" : "--place";
  const std::string value = !cfg.devices.empty() ? cfg.devices : cfg.place;
  const char* given = !cfg.device_memory_budget.empty() ? "--device-memory-budget"
                      : cfg.max_pinned_gb != 0            ? "--max-pinned-gb"
                      : cfg.plan_only                     ? "--plan-only"
                      : cfg.param_device == "cpu"         ? "--param-device cpu"
                                                          : nullptr;
  TD_CHECK_ARG(given == nullptr, "train", "{} {}: {} plans one device's run; not supported with {} yet", flag, value,
               given ? given : "", flag);
}

static void check_save_trains(const TrainConfig& cfg, const std::string& planning) {
  TD_CHECK_ARG(planning.empty() || cfg.save.empty(), "train",
               "--save {}: the weights would not be trained ({}); drop --save or use a device that computes",
               cfg.save, planning);
}

// A sequence model without --data: planned for windows of its block size of GPT-2's
// vocabulary (--vocab-size another), as many as any run could take.
static void plan_without_data(Run& r) {
  const TrainConfig& cfg = r.cfg;
  const int64_t block = cfg.block_size > 0 ? cfg.block_size : nn::sequence_block_size(cfg.model);
  const int64_t vocab = cfg.vocab_size > 0 ? cfg.vocab_size : kPlannedVocab;
  r.compute_dtype = precision_dtype(cfg.precision);
  r.train_data = r.test_data = planned_windows(block, vocab, int64_t{1} << 40);
  r.vocab_size = vocab;
  r.spec = nn::ModelSpec{0, 0, 0, vocab, false, block};
  r.spec.n_layer = cfg.n_layer;
  r.spec.n_head = cfg.n_head;
  r.spec.n_embd = cfg.n_embd;
  r.spec.n_positions = cfg.block_size;
}

// What build_run refuses after the memory plan, checked on the flags, the device and the data's
// sizes alone: the dry runs (--plan-only, --print-config) refuse what the run would.
static void check_before_build(const Run& r, int world_size) {
  const TrainConfig& cfg = r.cfg;
  check_save_trains(cfg, planning_note(r.device));
  if (r.compute_dtype != DType::f32) {
    const nn::ModulePtr shapes = nn::make_model_shapes(cfg.model, r.spec);
    check_precision_support(r.compute_dtype, r.device, cfg.precision, compute_dtype_ops(*shapes));
  }
  if (cfg.activations_device == "cpu") check_activation_offload_device(r.device);
  const int64_t samples = (r.train_data->size() + world_size - 1) / world_size;
  schedule_options(cfg, samples / cfg.batch_size);  // drop_last: whole batches
}

MemoryPlan plan_training(const TrainConfig& given) {
  const TrainConfig cfg = with_implied_flags(given);
  validate(cfg);
  check_names(cfg);
  TD_CHECK_ARG(
      cfg.devices.empty() && cfg.place.empty(), "train",
      "--plan-only: a run over --devices or --place is not planned yet; expected one --device");
  Run r;
  r.cfg = pipeline_start(cfg);
  r.device = resolve_device(cfg.device);
  if (nn::is_sequence_model(cfg.model) && cfg.data_dir == kDefaultDataDir && !is_token_data(cfg.data_dir))
    plan_without_data(r);
  else
    open_data(r, r.cfg, nullptr, nullptr);
  const int world_size = std::max(1, comm::launch_info().world_size);
  MemoryPlan plan = plan_run(r, world_size);
  check_before_build(r, world_size);
  if (!cfg.init.empty()) {  // --init's header against the model's shapes, as the run checks it first
    const nn::ModulePtr shapes = nn::make_model_shapes(cfg.model, r.spec);
    init_file_source(*shapes, cfg.init, cfg.init_exclude, nn::ValueSource{});
  }
  return plan;
}

std::unique_ptr<Run> build_run(const TrainConfig& given, std::shared_ptr<const data::Dataset> train_set,
                               std::shared_ptr<const data::Dataset> test_set, comm::CommunicatorPtr comm) {
  const TrainConfig cfg = with_implied_flags(given);
  validate(cfg);
  check_names(cfg);  // before loading data
  auto r = std::make_unique<Run>();
  r->cfg = pipeline_start(cfg);
  std::optional<SplitPlan> plan;
  if (!cfg.devices.empty()) plan = prepare_split(r->cfg);
  r->device = plan ? plan->devices[0].device : resolve_device(cfg.device);
  r->planning = plan ? split_planning(*plan) : planning_note(r->device);
  check_save_trains(cfg, r->planning);
  set_threads(compute_threads(r->cfg, plan ? &*plan : nullptr));
  bind_host_threads(cfg.bind);  // before the update threads and loader workers start
  open_data(*r, cfg, std::move(train_set), std::move(test_set));
  // The memory plan, before the model, its optimizer and the feeds allocate anything: a run
  // that does not fit stops here with the numbers.
  if (cfg.devices.empty() && cfg.place.empty()) {
    r->memory_plan = plan_run(*r, comm ? comm->world_size() : 1);
    r->planned = true;
    r->cfg.param_prefetch = r->memory_plan.param_prefetch;  // --param-prefetch auto: the depth chosen
    check_memory_plan(r->memory_plan);
  } else {
    check_plan_flags(cfg);
  }
  // --max-pinned-gb caps the pinned pool itself, not only the plan (0: no cap).
  pinned_allocator().set_reserve_limit(
      cfg.max_pinned_gb > 0 ? std::max<size_t>(1, static_cast<size_t>(cfg.max_pinned_gb * (1 << 30))) : 0,
      fmt::format("--max-pinned-gb {} (pinned host memory)", cfg.max_pinned_gb));
  // Streamed homes of a GPT: built without memory, each home written from the init (or --init's
  // file) part by part, so the whole model never exists on the host (PyTorch's meta device).
  const bool lazy = cfg.place.empty() && cfg.devices.empty() && nn::is_sequence_model(cfg.model) &&
                    choose_home(cfg, comm ? comm->world_size() : 1).kind == HomeKind::streamed;
  r->model = lazy ? nn::make_model_lazy(cfg.model, r->spec, cfg.seed, &r->lazy_values)
                  : nn::make_model(cfg.model, r->spec, cfg.seed);
  if (cfg.recompute == "blocks")
    check_recompute_blocks(r->model->set_recompute(true), cfg.model);  // as plan_run, for --devices and --place
  if (lazy && !cfg.init.empty()) {
    r->lazy_values = init_file_source(*r->model, cfg.init, cfg.init_exclude, r->lazy_values, &r->init_fingerprint);
  } else if (!cfg.init.empty()) {
    load_init_weights(*r->model, cfg.init, cfg.init_exclude);
  }
  if (r->compute_dtype != DType::f32) {
    check_precision_support(r->compute_dtype, r->device, cfg.precision, compute_dtype_ops(*r->model));
    r->model->set_compute_dtype(r->compute_dtype);  // on the host, before the move
  }
  std::shared_ptr<ParamStreamer> stream;
  const bool offload = cfg.activations_device == "cpu";
  if (!cfg.place.empty()) {
    if (offload) offload_activations(*r, cfg);  // before a chain is placed (it hides its blocks)
    place_model(*r, cfg, comm && comm->world_size() > 1);
  } else {
    stream = home_parameters(*r, r->cfg, comm);  // streamed from the host, or moved to the device
    if (offload) offload_activations(*r, cfg);
  }
  if (comm && comm->world_size() > 1) {
    comm->set_timeout_seconds(cfg.dist_timeout);
    r->comm = comm;
    r->device_comm = comm::for_device(comm, r->device);
    if (!stream) {  // streamed homes did both before they were made (host buffers)
      check_same_run(*comm, cfg, *r->model);
      if (cfg.place.empty()) {
        broadcast_model(*r->device_comm, *r->model, r->device);
      } else {
        broadcast_placed_model(comm, *r->model);  // each tensor with its device's communicator
      }
    }
  }
  r->params = r->model->parameters();
  if (cfg.no_decay_bn_bias)
    for (nn::Parameter* p : r->params) p->decay = p->value.dim() > 1;  // BatchNorm weight/bias, biases: 1-d
  r->loss_fn = nn::CrossEntropyLoss(static_cast<float>(cfg.label_smoothing));
  build_feeds(*r, cfg, plan.has_value());
  if (uses_loss_scaler(cfg)) {  // a host home checks with it
    optim::LossScalerOptions scaling;
    scaling.init_scale = cfg.loss_scale_init;
    r->scaler = std::make_unique<optim::LossScaler>(r->device, scaling);
  }
  r->home = make_param_home(*r, cfg, plan.has_value(), std::move(stream));
  build_schedule(*r, cfg);
  if (cfg.clip_grad_norm > 0)  // where the gradients are
    r->grad_norm = Tensor::empty({1}, DType::f32, r->home->grad_device(r->device));
  if (PlacedUpdate::needed(*r)) r->placed_update = std::make_shared<PlacedUpdate>();
  if (plan) {
    const nn::ModelSpec spec = r->spec;
    const DType dtype = r->compute_dtype;
    for (size_t d = 1; d < plan->devices.size() && dtype != DType::f32; ++d)
      check_precision_support(dtype, plan->devices[d].device, cfg.precision, compute_dtype_ops(*r->model));
    auto make_replica = [&] {
      nn::ModulePtr m = nn::make_model(cfg.model, spec, cfg.seed);
      if (dtype != DType::f32) m->set_compute_dtype(dtype);  // on the host, before the move
      if (cfg.recompute == "blocks") m->set_recompute(true);  // each replica recomputes its own blocks
      if (r->activations) ActivationOffloads::install(r->activations, *m);
      return m;
    };
    r->split = std::make_unique<SplitRunner>(*plan, r->model, make_replica, static_cast<float>(cfg.label_smoothing),
                                             cfg.batch_size, r->scaler.get());
    r->split->attach(r->train_feed->loader());
  }
  return r;
}

}  // namespace tandem::train
