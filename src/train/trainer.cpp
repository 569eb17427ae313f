#include "tandem/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "tandem/cpu_binding.h"
#include "tandem/device_traits.h"
#include "tandem/nn/generate/gpt_weights.h"
#include "tandem/nn/gpt.h"
#include "tandem/ops.h"
#include "tandem/allocator.h"
#include "tandem/pinned.h"
#include "tandem/thread_pool.h"
#include "train/checkpoint/checkpointer.h"
#include "train/checkpoint/resume.h"
#include "train/checkpoint/snapshot.h"
#include "train/dist/dist_setup.h"
#include "train/evaluate.h"
#include "train/home/home_choice.h"
#include "train/place/activation_offload.h"
#include "train/run_builder.h"
#include "train/step_loop.h"
#include "train/weights.h"

namespace tandem::train {

struct Trainer::Impl {
  std::unique_ptr<Run> run;
  int64_t global_step = 0;  // steps done, the schedule's clock
  std::optional<checkpoint::ResumePoint> resume;  // --resume: where fit() starts
};

Trainer::Trainer(const TrainConfig& cfg) : Trainer(cfg, nullptr, nullptr) {}

Trainer::Trainer(const TrainConfig& cfg, std::shared_ptr<const data::Dataset> train_set,
                 std::shared_ptr<const data::Dataset> test_set, comm::CommunicatorPtr comm)
    : impl_(std::make_unique<Impl>()) {
  impl_->run = build_run(cfg, std::move(train_set), std::move(test_set), std::move(comm));
  if (!cfg.resume.empty()) {
    impl_->resume = checkpoint::resume_run(*impl_->run, cfg.resume);
    if (impl_->run->comm) check_same_resume(*impl_->run->comm, impl_->resume->global_step, impl_->resume->path);
  }
}

Trainer::~Trainer() = default;

nn::Module& Trainer::model() { return *impl_->run->model; }

const std::string& Trainer::planning_note() const { return impl_->run->planning; }
const MemoryPlan* Trainer::memory_plan() const {
  return impl_->run->planned ? &impl_->run->memory_plan : nullptr;
}

const std::vector<data::Field>& Trainer::fields() const { return impl_->run->train_feed->loader().fields(); }

// The tokenizer.model of a token data folder, "" when it has none.
static std::string data_tokenizer(const TrainConfig& cfg) {
  return find_tokenizer("", cfg.data_dir, "", {});
}

ModelCard Trainer::model_card() const {
  const Run& r = *impl_->run;
  if (r.token_data()) {  // a GPT: its sizes from its own GPT2Config record, the data's tokenizer
    std::map<std::string, std::string> config;
    for (const auto& [key, value] : r.model->config_metadata()) config[key] = value;
    config["model"] = r.cfg.model;
    NamedTensors state;
    for (const nn::NamedTensor& t : r.model->state_dict()) state.emplace_back(t.name, t.tensor);
    return language_model_card(r.cfg.model,
                               nn::gpt_config_of(state, config, 0, "--model " + r.cfg.model),
                               data_tokenizer(r.cfg));
  }
  return r.image_card;
}

namespace {

// A WeightCopy made by the checkpoints' snapshot (copy stream, pinned buffers).
class SnapshotWeights final : public WeightCopy {
 public:
  void wait() const override { snapshot.wait(); }
  const NamedTensors& tensors() const override { return snapshot.tensors(); }
  checkpoint::Snapshot snapshot;
};

}  // namespace

std::shared_ptr<const WeightCopy> Trainer::capture_weights() {
  Run& r = *impl_->run;
  r.home->gather_weights();  // --zero 3: the whole weights on every rank (a collective)
  NamedTensors state;
  for (const nn::NamedTensor& t : r.model->state_dict()) state.emplace_back(t.name, t.tensor);
  auto copy = std::make_shared<SnapshotWeights>();
  copy->snapshot.capture(state, r.device, r.train_stream());
  return copy;
}

void Trainer::set_online_source(std::shared_ptr<OnlineSampleSource> source) {
  Run& r = *impl_->run;
  // A split run mixes into the host batch before its parts are cut and copied.
  r.online = std::make_unique<OnlineMixer>(std::move(source), r.cfg.online_mix, r.split ? Device{} : r.device,
                                           r.train_stream());
}

// The precision line: what runs in which dtype, and on which kernels.
static std::string describe_precision(const Run& r) {
  const double init = r.cfg.loss_scale_init;
  std::string extra = r.scaler ? fmt::format("; dynamic loss scaling (GradScaler: {}, x2 after 2000 good steps, x0.5 "
                                             "and the step skipped on inf/NaN, floor 1)",
                                             init == 65536.0 ? std::string("2^16") : fmt::format("{}", init))
                               : "";
  if (r.cfg.clip_grad_norm > 0) extra += fmt::format("; gradients clipped to global L2 norm {}", r.cfg.clip_grad_norm);
  if (r.compute_dtype == DType::f32) return "\nprecision: fp32" + extra;
  const std::string note = ops::compute_note(r.compute_dtype, r.device);
  return fmt::format("\nprecision: {} (convolutions, matrix products and activations in {}; batch-norm statistics, "
                     "loss and softmax in f32; f32 master weights; {}){}{}",
                     r.cfg.precision, dtype_name(r.compute_dtype), compute_libraries(r.device), extra,
                     note.empty() ? "" : "\nnote: " + note);
}

// The third banner line of a distributed run: ranks, backend, shards and buckets.
static std::string describe_dist(const Run& r) {
  if (!r.comm) return "";
  return fmt::format("\ndistributed: {} ({}), batch {} per rank = {} global, {} train / {} test samples on this "
                     "rank, {}",
                     rank_note(r.comm.get()), r.home->dist_backend(r), r.cfg.batch_size,
                     r.cfg.batch_size * r.comm->world_size(), r.train_feed->loader().num_samples(),
                     r.test_feed->loader().num_samples(), r.home->describe_dist(r));
}

// The thread budget: compute threads, loader workers and the optimizer's thread, against the cores.
static std::string describe_threads(const Run& r) {
  const int compute = ops::get_num_threads(), cores = available_cores();
  const char* host_update = r.home->host_update_flag();
  const std::string workers = r.workers_autotuned ? std::string("autotuned loader workers")
                                                  : fmt::format("{} loader worker{}", r.cfg.num_workers,
                                                                r.cfg.num_workers == 1 ? "" : "s");
  const int optimizer = host_update ? 1 : 0;
  const int used = compute + (r.workers_autotuned ? 1 : r.cfg.num_workers) + optimizer;
  const bool cpu_device = r.split && r.split->has_cpu();
  return fmt::format("\nthread budget: {} compute thread{} (--threads{}), {} (--num-workers), optimizer {} "
                     "({}); {} threads on {} core{}{}",
                     compute, compute == 1 ? "" : "s",
                     r.cfg.threads > 0 ? "" : cpu_device ? ", default: cores less loader workers" : ", default: all cores",
                     workers, host_update ? "on 1 update thread" : "in the training thread",
                     host_update ? host_update : "--optimizer-device", used, cores, cores == 1 ? "" : "s",
                     cpu_device && used > cores ? " (the cpu device competes with the loader: lower --threads)" : "") +
         (cpu_binding().mode == BindMode::none ? "" : "\nbinding (--bind): update threads and data workers on " +
                                                          cpu_binding().describe());
}

// --place: where the modules are.
static std::string describe_place(const Run& r) {
  if (r.placement.empty()) return "";
  return fmt::format("\nplacement: modules {}; activations and gradients copied asynchronously at the boundaries, "
                     "each parameter updated where it lives",
                     r.placement);
}

std::string Trainer::describe() const {
  const Run& r = *impl_->run;
  // Data sets handed to the constructor have no format (detect); --data ones always have one.
  const std::string source =
      r.format == data::DatasetFormat::detect && !r.token_data() ? "the data sets given" : r.cfg.data_dir;
  return fmt::format(
      "tandem train: model {} ({} parameters) on {}, {} train / {} test samples from {}, batch {}, {} lr {} "
      "weight_decay {}{}, {} schedule, {}, {} thread{}, {} loader worker{}{}",
      r.cfg.model, r.model->num_parameters(), r.split ? r.cfg.devices : r.device.str(),
      r.train_data->size(), r.test_data->size(), source, r.cfg.batch_size, r.cfg.optimizer,
      r.cfg.lr, r.cfg.weight_decay, r.home->describe_optimizer(r),
      r.cfg.schedule,
      r.cfg.max_steps > 0 ? fmt::format("{} step{} (--max-steps)", r.cfg.max_steps, r.cfg.max_steps == 1 ? "" : "s")
                          : fmt::format("{} epoch{}", r.cfg.epochs, r.cfg.epochs == 1 ? "" : "s"),
      ops::get_num_threads(),
      ops::get_num_threads() == 1 ? "" : "s", r.workers_autotuned ? "autotuned" : std::to_string(r.cfg.num_workers),
      !r.workers_autotuned && r.cfg.num_workers == 1 ? "" : "s", describe_precision(r)) +
         "\ndata: " + r.data_note + describe_threads(r) + describe_dist(r) + (r.split ? fmt::format("\n{}", r.split->describe()) : std::string()) + describe_place(r) +
         (r.activations ? "\nactivations: each block's kept input waits in host memory between forward and "
                          "backward (--activations-device cpu), copied on its own stream"
                        : "") +
         r.home->describe(r) +
         (impl_->resume ? "\n" + impl_->resume->note : "");
}

EvalResult Trainer::evaluate() {
  Run& r = *impl_->run;
  r.home->flush();  // a host update's last (delayed) update reaches the model
  const EvalResult mine = r.home->evaluate(r.test_feed->loader().num_batches(), [&r] {
    return run_eval(*r.model, *r.test_feed, r.device, r.cfg.log_interval);
  });
  return r.comm ? sum_over_ranks(*r.comm, mine) : mine;
}

// The loader and prefetch settings in force at the end (the autotuner's choice).
static void record_pipeline(const Run& r, TrainResult& result) {
  result.num_workers = r.train_feed->loader().num_workers();
  result.prefetch_factor = r.train_feed->loader().prefetch_factor();
  result.prefetch_depth = r.train_feed->prefetcher() ? r.train_feed->prefetcher()->prefetch_depth() : 0;
  if (r.tuner) result.autotune = r.tuner->describe();
  if (r.format != data::DatasetFormat::detect) result.dataset_format = data::format_name(r.format);
  if (!r.comm) return;
  result.world_size = r.comm->world_size();
  result.rank = r.comm->rank();
  const HomeComm c = r.home->comm_figures(r);
  const CommFigures& f = c.figures;
  if (!c.kind.empty()) result.comm_kind = c.kind;
  if (c.hidden_share >= 0) result.comm_hidden_share = c.hidden_share;
  if (f.steps == 0) return;
  result.comm_seconds_per_step = f.seconds / static_cast<double>(f.steps);
  result.wire_bytes_per_step = f.bytes / static_cast<double>(f.steps);
  result.comm_skew_seconds_per_step = f.skew_seconds / static_cast<double>(f.steps);
  double f32_bytes = 0;
  for (const nn::Parameter* p : r.params)
    if (p->requires_grad) f32_bytes += 4.0 * static_cast<double>(p->value.numel());
  result.wire_share = f32_bytes > 0 ? result.wire_bytes_per_step / f32_bytes : 0;
}

// A split run's figures over all epochs: each device's samples and busy time, the parts of every step.
static void record_split(const Run& r, TrainResult& result) {
  double seconds = 0;
  for (const EpochStats& e : result.epochs) {
    seconds += e.seconds;
    for (size_t d = 0; d < e.split.size(); ++d) {
      if (result.split.size() <= d) result.split.push_back({e.split[d].device});
      result.split[d].samples += e.split[d].samples;
      result.split[d].busy_seconds += e.split[d].busy_seconds;
    }
  }
  int64_t total = 0;
  for (const DeviceShare& s : result.split) total += s.samples;
  for (DeviceShare& s : result.split) {
    s.sample_share = total > 0 ? static_cast<double>(s.samples) / static_cast<double>(total) : 0;
    s.busy_share = seconds > 0 ? std::min(1.0, s.busy_seconds / seconds) : 0;
  }
  result.split_parts = r.split->history();
  result.split_moves = r.split->moves();
}

TrainResult Trainer::fit(const TrainCallbacks& cb) {
  using Clock = std::chrono::steady_clock;
  Run& r = *impl_->run;
  TrainResult result;
  const auto t_fit = Clock::now();
  double train_seconds = 0;
  int64_t train_samples = 0;
  int first_epoch = 1;
  const EpochStart* start = nullptr;
  checkpoint::Checkpointer ckpt(r, cb);
  ckpt.set_history(result);
  if (impl_->resume) {
    const checkpoint::ResumePoint& rp = *impl_->resume;
    result = rp.history;
    result.resumed_epoch = first_epoch = rp.epoch;
    impl_->global_step = rp.global_step;
    start = &rp.start;
    ckpt.resume_epoch(rp.start, r.cfg.log_interval);
  }
  // --eval-interval: before the first step (nanoGPT's iteration 0) and every K steps.
  r.evaluate_at = [this, &cb](int epoch, int64_t global_step) {
    const EvalResult e = evaluate();
    if (cb.on_eval) cb.on_eval(EvalPoint{epoch, global_step, e.loss, e.accuracy, e.samples});
  };
  if (r.cfg.eval_interval > 0 && impl_->global_step == 0) r.evaluate_at(first_epoch, 0);
  // --max-steps: epochs until the steps are done (the last one may end early).
  const auto more = [&](int epoch) {
    return r.cfg.max_steps > 0 ? impl_->global_step < r.cfg.max_steps : epoch <= r.cfg.epochs;
  };
  for (int epoch = first_epoch; more(epoch); ++epoch) {
    EpochTraining t;
    try {
      t = train_epoch(r, epoch, impl_->global_step, cb, epoch == first_epoch ? start : nullptr, &ckpt);
    } catch (const checkpoint::StopRequested& stop) {
      result.stopped_by = stop.signal;
      break;
    }
    EpochStats& s = t.stats;
    train_seconds += s.seconds;
    train_samples += t.samples;
    s.skipped_train = r.train_feed->loader().skipped_samples();
    const EvalResult e = evaluate();
    s.skipped_test = r.test_feed->loader().skipped_samples();
    s.test_loss = e.loss;
    s.test_accuracy = e.accuracy;
    s.computed = r.planning.empty();
    s.pinned_peak_bytes = pinned_allocator().stats().peak_reserved_bytes;
    s.pinned_allocated_bytes = pinned_allocator().stats().allocated_bytes;
    s.pageable_allocated_bytes = host_allocator().stats().allocated_bytes;
    if (s.test_accuracy > result.best_test_accuracy || result.best_epoch == 0) {
      result.best_test_accuracy = s.test_accuracy;
      result.best_epoch = epoch;
    }
    result.epochs.push_back(s);
    if (cb.on_epoch_end) cb.on_epoch_end(s);
    ckpt.epoch_end(epoch, impl_->global_step);
  }
  r.evaluate_at = nullptr;
  // --zero 3: every rank's parameters whole again (a collective), for saving and reading them.
  r.home->gather_weights();
  ckpt.finish(result);
  if (r.split) record_split(r, result);
  result.wall_seconds = std::chrono::duration<double>(Clock::now() - t_fit).count();
  result.samples_per_s = train_seconds > 0 ? static_cast<double>(train_samples) / train_seconds : 0;
  result.tokens_per_s = result.samples_per_s * static_cast<double>(data::tokens_per_sample(fields()));
  result.token_data = r.token_data();
  record_pipeline(r, result);
  result.planning = r.planning;
  result.disk = r.home->describe_end(r);
  return result;
}

void Trainer::save_weights(const std::string& path) {
  Run& r = *impl_->run;
  r.home->flush();
  std::map<std::string, std::string> extra;
  if (r.token_data()) {  // where `tandem generate` and `tandem serve` find the tokenizer
    const std::string tok = data_tokenizer(r.cfg);
    if (!tok.empty())
      extra["tokenizer"] = std::filesystem::absolute(tok).lexically_normal().string();
  }
  save_model_weights(path, *r.model, r.cfg.model, r.spec, precision_dtype(r.cfg.save_dtype), extra);
}

profile::SummaryOptions summary_options(const TrainConfig& cfg, const TrainResult& r) {
  profile::SummaryOptions o;
  o.num_workers = r.num_workers;
  o.cores = available_cores();
  o.batch_size = cfg.batch_size;
  o.prefetch_factor = r.prefetch_factor;
  o.prefetch_depth = r.prefetch_depth;
  o.autotuned = cfg.num_workers < 0;  // the worker count was chosen by the autotuner
  o.packed = r.dataset_format == "packed";
  o.params_streamed = choose_home(cfg, 1).kind == HomeKind::streamed;
  o.update_delayed = o.params_streamed && cfg.offload_delay == 1;
  o.note = r.planning;
  return o;
}

}  // namespace tandem::train
