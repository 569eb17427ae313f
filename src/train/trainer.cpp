#include "tandem/train/trainer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tandem/data/autotune.h"
#include "tandem/data/fused_image_transform.h"
#include "tandem/data/loader.h"
#include "tandem/data/mnist_like.h"
#include "tandem/data/prefetcher.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/models.h"
#include "tandem/ops.h"
#include "tandem/optim/kernels.h"
#include "tandem/optim/offload.h"
#include "tandem/optim/optimizer.h"
#include "tandem/optim/schedule.h"
#include "tandem/pinned.h"
#include "tandem/profile/profiler.h"
#include "tandem/safetensors.h"
#include "tandem/thread_pool.h"
#include "tandem/virt.h"

namespace tandem::train {

using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Parses the device flag: cpu, virt[:N][?speed=..&bw=..&latency_us=..&memory_mb=..] (the
// virt device is configured from the options) or cuda[:N] (must exist: runtime_for throws
// "built without CUDA" / "no CUDA device found").
// Errors in the text or the virt options name the flag: "[train] --device virt:0?speed=0: ...".
static Device resolve_device(const std::string& text) {
  DeviceSpec spec;
  try {
    spec = DeviceSpec::parse(text);
    if (spec.device.kind == DeviceKind::virt) configure_virt(spec);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument) throw;
    std::string what = e.what();
    if (!what.empty() && what[0] == '[') what.erase(0, what.find("] ") + 2);  // drop "[op] "
    throw_error(ErrorCode::invalid_argument, "train", fmt::format("--device {}: {}", text, what));
  }
  TD_CHECK_ARG(spec.device.kind == DeviceKind::virt || spec.options.empty(), "train",
               "--device {}: options are only accepted for virt devices", text);
  if (!spec.device.is_host()) runtime_for(spec.device);
  return spec.device;
}

static constexpr int kPrefetchDepth = 2;  // batches copied to the device ahead of the step

// How far the step loop may run ahead of the compute stream: it waits, every `interval`
// steps, for the metrics read-back issued `interval` steps earlier (MetricsReadback::issue),
// so at most 2 * interval steps -- and never more than an epoch has batches. Each step of
// lead costs one batch of device memory and one of pinned host memory; beyond kLeadBudget
// bytes of either the lead is shortened and the prefetcher's back-pressure throttles the
// host instead (large batches, or a long --log-interval).
static constexpr int64_t kLeadBudget = int64_t{256} << 20;
static int host_lead(int64_t interval, const data::Loader& loader) {
  const int64_t batch_bytes = loader.max_batch_size() * (loader.sample_dims().numel() * 4 + 8);  // f32, i64
  const int64_t two_k = 2 * std::min<int64_t>(interval, data::kMaxHostLead);  // no overflow for huge K
  return static_cast<int>(std::min<int64_t>({two_k, loader.num_batches(), data::kMaxHostLead, kLeadBudget / batch_bytes}));
}

// Batches for the step loop: straight from the loader on the host; on a device through a
// DevicePrefetcher (pinned slots, copy stream, kPrefetchDepth batches ahead, a device ring
// deep enough for the loop's run-ahead so that the prefetcher itself never makes it wait).
class BatchFeed {
 public:
  // `op` and `knobs` word the error when the device cannot hold the batch buffers, e.g.
  // ("train", "training batches: lower --log-interval or --batch-size").
  BatchFeed(std::unique_ptr<data::Loader> loader, Device device, int64_t interval, const char* op, const char* knobs)
      : loader_(std::move(loader)) {
    if (!device.is_host()) {
      data::PrefetcherOptions po;
      po.prefetch_depth = kPrefetchDepth;
      po.host_lead = host_lead(interval, *loader_);
      prefetcher_ = std::make_unique<data::DevicePrefetcher>(*loader_, device, po);
      prefetcher_->compute_stream().set_label("compute");
      try {
        prefetcher_->reserve();  // now, not inside the first steps: fresh buffers wait for compute
      } catch (const Error& e) {
        if (e.code() != ErrorCode::out_of_memory) throw;
        throw_error(ErrorCode::out_of_memory, op, fmt::format("{}; {}", e.what(), knobs));
      }
    }
  }
  data::Loader& loader() { return *loader_; }
  data::DevicePrefetcher* prefetcher() { return prefetcher_.get(); }
  void begin_epoch(uint64_t epoch) {
    if (prefetcher_) {
      prefetcher_->begin_epoch(epoch);
    } else {
      loader_->begin_epoch(epoch);
    }
  }
  /// The next batch's images [B, C, H, W] and labels [B] on the device, valid until the next call.
  bool next(Tensor& images, Tensor& labels) {
    if (prefetcher_) {
      if (!prefetcher_->next(device_batch_)) return false;
      images = device_batch_.images;
      labels = device_batch_.labels;
      return true;
    }
    if (!loader_->next(host_batch_)) return false;
    images = host_batch_.images;
    labels = host_batch_.labels;
    return true;
  }
  void release() {
    host_batch_.release();
    device_batch_ = data::DeviceBatch();
  }
  /// The stream the step's ops run on (the one that waits for each batch's copy).
  Stream compute_stream() const {
    return prefetcher_ ? prefetcher_->compute_stream() : runtime(DeviceKind::cpu).default_stream(0);
  }

 private:
  std::unique_ptr<data::Loader> loader_;  // declared first: the prefetcher is destroyed before it
  std::unique_ptr<data::DevicePrefetcher> prefetcher_;
  data::Batch host_batch_;
  data::DeviceBatch device_batch_;
};

static void set_threads(int threads) { ops::set_num_threads(threads > 0 ? threads : available_cores()); }

// Batch slots in pinned memory when batches are copied to a device.
static Allocator* slot_allocator(Device device) { return device.is_host() ? nullptr : &pinned_allocator(); }

// `op` and `knobs`: see BatchFeed (the eval command calls --eval-batch-size --batch-size).
static std::unique_ptr<BatchFeed> make_test_feed(const std::shared_ptr<const data::Dataset>& set,
                                                 const TrainConfig& cfg, Device device, const char* op,
                                                 const char* knobs) {
  data::LoaderOptions lo;
  lo.allocator = slot_allocator(device);
  lo.batch_size = cfg.eval_batch_size;
  lo.num_workers = cfg.num_workers;
  lo.prefetch_factor = cfg.prefetch_factor;
  lo.drop_last = false;  // every test sample counts exactly once
  lo.name = "eval loader";
  lo.shuffle = false;
  auto tf = std::make_shared<data::FusedImageTransform>(data::FusedImageTransform::fashion_mnist_eval());
  return std::make_unique<BatchFeed>(std::make_unique<data::Loader>(set, tf, lo), device, cfg.log_interval, op, knobs);
}

// Loss and accuracy of a run of steps, accumulated on the device into metrics [4] f32 (see
// ops::softmax_cross_entropy_accumulate) and read back asynchronously: issue() enqueues, on
// the compute stream, a copy of the accumulator into a pinned host slot, clears the
// accumulator and records an event; the host reads a slot once its event completed (poll),
// and issue() then waits for the read-back issued before -- `interval` steps earlier, normally
// complete by then. That wait is the step loop's only host wait on the compute stream and its
// throttle: when the device is the bottleneck the host runs K to 2K steps ahead of it (the
// device always has at least K steps queued), never further. Two slots.
class MetricsReadback {
 public:
  struct Window {
    int64_t first_step = 0, last_step = 0;  // 1-based steps of the epoch, inclusive
    double loss_sum = 0;                    // sum of per-sample losses (NaN/inf propagate)
    int64_t correct = 0, samples = 0, bad_labels = 0;
  };

  /// Reads back every `interval` steps (K).
  MetricsReadback(Device device, Stream stream, int64_t interval)
      : device_(device), stream_(std::move(stream)), interval_(interval) {
    acc_ = Tensor::empty({4}, DType::f32, device);
    ops::zero_(acc_);
    for (Slot& slot : slots_) slot.host = device.is_host() ? Tensor::zeros({4}) : pinned_empty({4});
  }
  ~MetricsReadback() {
    for (Slot& slot : slots_) slot.copied.synchronize();  // copies into our pinned slots
  }

  const Tensor& accumulator() const { return acc_; }

  /// After `step` (1-based) steps: every `interval` steps, issues the window's read-back.
  void step_done(int64_t step, std::deque<Window>& done) {
    if (step % interval_ != 0) return;
    issue(window_first_, step, done);
    window_first_ = step + 1;
  }
  /// After the last of `steps` steps: reads back the rest and waits for every read-back.
  void finish(int64_t steps, std::deque<Window>& done) {
    if (window_first_ <= steps) issue(window_first_, steps, done);
    while (!pending_.empty()) wait_oldest(done);
  }

  /// Moves the read-backs whose copies completed into `done`, oldest first; never blocks.
  void poll(std::deque<Window>& done) {
    while (!pending_.empty() && slots_[pending_.front().slot].copied.query()) take(done);
  }
 private:
  struct Slot {
    Tensor host;  // [4] f32, pinned when the device is not the host
    Event copied;
  };
  struct Pending {
    size_t slot;
    int64_t first_step, last_step;
  };
  /// Enqueues the read-back of steps [first_step, last_step] and clears the accumulator, then
  /// waits (host) for the read-back issued before this one if it is still in flight.
  void issue(int64_t first_step, int64_t last_step, std::deque<Window>& done) {
    TD_ASSERT(pending_.size() < slots_.size());
    const size_t k = next_slot_;
    next_slot_ = (next_slot_ + 1) % slots_.size();
    Slot& slot = slots_[k];
    runtime_for(device_).copy_async(slot.host.raw_data(), Device{}, acc_.raw_data(), device_, acc_.nbytes(), stream_);
    slot.copied = stream_.record();
    ops::zero_(acc_);
    pending_.push_back({k, first_step, last_step});
    while (pending_.size() > 1) wait_oldest(done);
  }
  /// Waits for the oldest read-back in flight and moves it into `done`.
  void wait_oldest(std::deque<Window>& done) {
    if (pending_.empty()) return;
    const Event& copied = slots_[pending_.front().slot].copied;
    if (!copied.query()) {
      const int64_t t0 = profile::now_ns();
      copied.synchronize();
      profile::Profiler::global().record(profile::Stage::wait_device, "metrics read-back", t0, profile::now_ns());
    }
    take(done);
  }

  void take(std::deque<Window>& done) {
    const Pending p = pending_.front();
    pending_.pop_front();
    const float* m = static_cast<const float*>(slots_[p.slot].host.raw_data());
    done.push_back({p.first_step, p.last_step, m[0], std::llround(m[1]), std::llround(m[2]), std::llround(m[3])});
  }

  Device device_;
  Stream stream_;
  int64_t interval_;
  int64_t window_first_ = 1;  // first step of the window being accumulated
  Tensor acc_;
  std::array<Slot, 2> slots_;
  size_t next_slot_ = 0;
  std::deque<Pending> pending_;
};

// Throws when a training read-back window saw labels outside the model's classes or a
// non-finite loss (the run stops; nothing is saved). `lr_of_step(s)`: the lr step s ran at.
template <typename LrOfStep>
static void check_window(const MetricsReadback::Window& w, int epoch, const LrOfStep& lr_of_step) {
  const std::string steps = w.first_step == w.last_step ? fmt::format("step {}", w.first_step)
                                                         : fmt::format("steps {}..{}", w.first_step, w.last_step);
  TD_CHECK(w.bad_labels == 0, ErrorCode::invalid_argument, "train",
           "{} label(s) outside the model's classes in {} of epoch {}: expected labels in [0, classes)",
           w.bad_labels, steps, epoch);
  if (!std::isfinite(w.loss_sum)) {
    const double lr0 = lr_of_step(w.first_step), lr1 = lr_of_step(w.last_step);
    const std::string lr = lr0 == lr1 ? fmt::format("lr {:.3g}", lr0) : fmt::format("lr {:.3g} to {:.3g}", lr0, lr1);
    throw_error(ErrorCode::numerical, "train",
                fmt::format("loss is {} in {} of epoch {} ({}): expected a finite loss; lower --lr or check the data",
                            std::isnan(w.loss_sum) ? "NaN" : "infinite", steps, epoch, lr));
  }
}

// Loss and accuracy over the test set; metrics read back every `interval` batches (the same
// throttle as training: the host waits only for the read-back issued `interval` batches earlier).
static EvalResult run_eval(nn::Module& model, BatchFeed& feed, Device device, int64_t interval) {
  profile::ScopedSpan span(profile::Stage::eval, "evaluate");
  model.eval();
  nn::CrossEntropyLoss loss_fn;
  feed.begin_epoch(0);
  MetricsReadback metrics(device, feed.compute_stream(), interval);
  std::deque<MetricsReadback::Window> done;
  Tensor images, labels;
  int64_t batches = 0;
  while (feed.next(images, labels)) {
    Tensor logits = model.forward(images);
    loss_fn.forward_accumulate(logits, labels, metrics.accumulator());
    metrics.step_done(++batches, done);
  }
  metrics.finish(batches, done);
  images = labels = Tensor();
  feed.release();
  EvalResult r;
  for (const auto& w : done) {
    TD_CHECK(w.bad_labels == 0, ErrorCode::invalid_argument, "eval",
             "{} test label(s) outside the model's classes: expected labels in [0, classes)", w.bad_labels);
    r.correct += w.correct;
    r.samples += w.samples;
    r.loss += w.loss_sum;
  }
  r.loss = r.samples ? r.loss / static_cast<double>(r.samples) : 0;
  r.accuracy = r.samples ? static_cast<double>(r.correct) / static_cast<double>(r.samples) : 0;
  TD_CHECK(std::isfinite(r.loss), ErrorCode::numerical, "eval",
           "test loss is {} over {} samples: expected a finite loss (the weights hold NaN/inf or overflow)",
           std::isnan(r.loss) ? "NaN" : "infinite", r.samples);
  return r;
}

// Both models take 1x28x28 images; a dataset of another size is refused up front, naming it.
static std::shared_ptr<data::MnistLike> load_split(const std::string& dir, const std::string& split,
                                                   const std::string& model) {
  auto set = std::make_shared<data::MnistLike>(dir, split);
  const data::ImageDims d = set->dims();
  TD_CHECK(d.channels == 1 && d.height == 28 && d.width == 28, ErrorCode::format, "dataset",
           "{}/{}-images-idx3-ubyte: model {} expects 28x28 images, found {}x{}", dir, split, model, d.height,
           d.width);
  return set;
}

// Waits until the device ran everything queued on its default stream (the stream the model's
// ops use). A run stopped by an error (out of device memory mid-step, a NaN loss) leaves work
// queued there; returning to exit() with it would let the stream thread run kernels while
// the libraries they call (oneDNN) destroy their static state: a crash after the error line.
// Errors of the queued work are dropped: the error that stopped the run is the one reported.
static void drain_device(Device device) noexcept {
  if (device.is_host()) return;
  try {
    runtime_for(device).default_stream(device.index).synchronize();
  } catch (...) {
  }
}

struct Trainer::Impl {
  TrainConfig cfg;
  Device device;
  std::shared_ptr<const data::Dataset> train_set, test_set;
  std::unique_ptr<BatchFeed> train_feed, test_feed;
  nn::ModulePtr model;
  std::vector<nn::Parameter*> params;
  nn::CrossEntropyLoss loss_fn;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::LrSchedule> schedule;
  std::unique_ptr<data::PipelineTuner> tuner;  // --num-workers / --prefetch-factor auto
  bool workers_autotuned = false;               // --num-workers auto (not only --prefetch auto)
  int64_t global_step = 0;
  ~Impl() { drain_device(device); }  // also when the constructor throws after placing the model
};

// --num-workers auto and --prefetch-factor auto (-1) start from 1 worker and prefetch_factor 2;
// the PipelineTuner then moves them (and the device prefetch depth) during the first steps.
static TrainConfig pipeline_start(TrainConfig c) {
  if (c.num_workers < 0) c.num_workers = 1;
  if (c.prefetch_factor < 0) c.prefetch_factor = 2;
  return c;
}

Trainer::Trainer(const TrainConfig& cfg) : Trainer(cfg, nullptr, nullptr) {}

Trainer::Trainer(const TrainConfig& cfg, std::shared_ptr<const data::Dataset> train_set,
                 std::shared_ptr<const data::Dataset> test_set)
    : impl_(std::make_unique<Impl>()) {
  validate(cfg);
  Impl& m = *impl_;
  m.cfg = pipeline_start(cfg);
  m.device = resolve_device(cfg.device);
  set_threads(cfg.threads);
  m.model = nn::make_model(cfg.model, cfg.seed);
  if (!m.device.is_host()) m.model->to(m.device);  // before the optimizer: its state follows
  m.params = m.model->parameters();
  m.loss_fn = nn::CrossEntropyLoss(static_cast<float>(cfg.label_smoothing));
  if (!train_set) train_set = load_split(cfg.data_dir, "train", cfg.model);
  if (!test_set) test_set = load_split(cfg.data_dir, "t10k", cfg.model);
  for (const auto* set : {train_set.get(), test_set.get()}) {
    const data::ImageDims d = set->dims();
    TD_CHECK_ARG(d.channels == 1 && d.height == 28 && d.width == 28, "train",
                 "dataset: model {} expects 1x28x28 images, found {}x{}x{}", cfg.model, d.channels, d.height,
                 d.width);
  }
  m.train_set = std::move(train_set);
  m.test_set = std::move(test_set);

  data::LoaderOptions lo;
  lo.batch_size = cfg.batch_size;
  lo.num_workers = m.cfg.num_workers;
  lo.prefetch_factor = m.cfg.prefetch_factor;
  lo.drop_last = true;
  lo.shuffle = true;
  lo.seed = cfg.seed;
  lo.allocator = slot_allocator(m.device);
  auto tf = std::make_shared<data::FusedImageTransform>(cfg.augment ? data::FusedImageTransform::fashion_mnist_train()
                                                                    : data::FusedImageTransform::fashion_mnist_eval());
  auto train_loader = std::make_unique<data::Loader>(m.train_set, tf, lo);
  TD_CHECK_ARG(train_loader->num_batches() > 0, "train",
               "--batch-size {} is larger than the {} training samples (drop_last leaves no batch)", cfg.batch_size,
               m.train_set->size());
  m.train_feed = std::make_unique<BatchFeed>(std::move(train_loader), m.device, cfg.log_interval, "train",
                                             "training batches: lower --log-interval or --batch-size");
  m.test_feed = make_test_feed(m.test_set, m.cfg, m.device, "train",
                               "test batches: lower --log-interval or --eval-batch-size");
  if (cfg.num_workers < 0 || cfg.prefetch_factor < 0) {
    data::AutotuneOptions ao;
    ao.tune_workers = m.workers_autotuned = cfg.num_workers < 0;
    ao.tune_prefetch = cfg.prefetch_factor < 0;
    ao.cpu_budget = available_cores();
    m.tuner = std::make_unique<data::PipelineTuner>(m.train_feed->loader(), m.train_feed->prefetcher(), ao);
  }

  optim::OptimizerOptions oo;
  oo.lr = cfg.lr;
  oo.weight_decay = cfg.weight_decay;
  oo.momentum = cfg.momentum;
  oo.nesterov = cfg.nesterov;
  oo.betas = {cfg.beta1, cfg.beta2};
  oo.eps = cfg.eps;
  if (!cfg.simd.empty()) {
    const optim::SimdLevel level = optim::parse_simd_level(cfg.simd);
    TD_CHECK(optim::simd_level_supported(level), ErrorCode::not_available, "train",
             "--simd {}: this CPU does not support it (best here: {})", cfg.simd,
             optim::simd_level_name(optim::best_simd_level()));
    optim::set_simd_level(level);
  }
  if (cfg.optimizer_device == "cpu") {
    // Offloaded: master weights and moments on the host, gradients copied per bucket during
    // backward (the hook), updated parameters uploaded per bucket (tandem/optim/offload.h).
    optim::OffloadOptions off;
    off.bucket_cap_mb = cfg.bucket_cap_mb;
    off.delay = cfg.offload_delay;
    off.delay_warmup_steps = cfg.offload_delay_warmup;
    auto offloaded = std::make_unique<optim::OffloadOptimizer>(cfg.optimizer, m.params, oo, off);
    offloaded->attach(*m.model);
    m.optimizer = std::move(offloaded);
  } else {
    m.optimizer = optim::make_optimizer(cfg.optimizer, m.params, oo);
  }

  const int64_t steps_per_epoch = m.train_feed->loader().num_batches();
  optim::ScheduleOptions so;
  so.lr = cfg.lr;
  so.total_steps = steps_per_epoch * cfg.epochs;
  so.warmup_steps = static_cast<int64_t>(std::llround(cfg.warmup_epochs * static_cast<double>(steps_per_epoch)));
  so.step_size = steps_per_epoch * cfg.step_size_epochs;
  so.gamma = cfg.gamma;
  TD_CHECK_ARG(cfg.schedule != "cosine" || so.warmup_steps < so.total_steps, "train",
               "--warmup-epochs {}: expected fewer warmup steps than the run's {} steps ({} epochs of {}), got {}",
               cfg.warmup_epochs, so.total_steps, cfg.epochs, steps_per_epoch, so.warmup_steps);
  m.schedule = optim::make_schedule(cfg.schedule, so);
}

Trainer::~Trainer() = default;

nn::Module& Trainer::model() { return *impl_->model; }

std::string Trainer::describe() const {
  const Impl& m = *impl_;
  std::string offload;  // where an offloaded optimizer runs and how
  if (const auto* off = dynamic_cast<const optim::OffloadOptimizer*>(m.optimizer.get())) {
    const std::string delay = off->delay() == 1 && m.cfg.offload_delay_warmup > 0
                                  ? fmt::format("delay 1 after {} steps", m.cfg.offload_delay_warmup)
                                  : fmt::format("delay {}", off->delay());
    offload = fmt::format(" on the cpu (offloaded, {} bucket{}, --bucket-cap-mb {}, {}, {} SIMD)", off->buckets().size(),
                          off->buckets().size() == 1 ? "" : "s", m.cfg.bucket_cap_mb, delay, optim::simd_level_name());
  }
  return fmt::format(
      "tandem train: model {} ({} parameters) on {}, {} train / {} test samples from {}, batch {}, {} lr {} "
      "weight_decay {}{}, {} schedule, {} epoch{}, {} thread{}, {} loader worker{}",
      m.cfg.model, m.model->num_parameters(), m.device.str(), m.train_set->size(), m.test_set->size(),
      m.cfg.data_dir, m.cfg.batch_size, m.cfg.optimizer, m.cfg.lr, m.cfg.weight_decay, offload,
      m.cfg.schedule, m.cfg.epochs, m.cfg.epochs == 1 ? "" : "s", ops::get_num_threads(),
      ops::get_num_threads() == 1 ? "" : "s", m.workers_autotuned ? "autotuned" : std::to_string(m.cfg.num_workers),
      !m.workers_autotuned && m.cfg.num_workers == 1 ? "" : "s");
}

EvalResult Trainer::evaluate() {
  impl_->optimizer->flush();  // an offloaded optimizer's last (delayed) update reaches the model
  return run_eval(*impl_->model, *impl_->test_feed, impl_->device, impl_->cfg.log_interval);
}

TrainResult Trainer::fit(const TrainCallbacks& cb) {
  Impl& m = *impl_;
  TrainResult result;
  const auto t_fit = Clock::now();
  double train_seconds = 0;
  int64_t train_images = 0;
  const int64_t interval = m.cfg.log_interval;
  for (int epoch = 1; epoch <= m.cfg.epochs; ++epoch) {
    const int64_t steps = m.train_feed->loader().num_batches();
    if (cb.on_epoch_begin) cb.on_epoch_begin(epoch, steps);
    m.model->train();
    m.train_feed->begin_epoch(static_cast<uint64_t>(epoch - 1));
    if (m.tuner) m.tuner->begin_epoch();
    MetricsReadback metrics(m.device, m.train_feed->compute_stream(), interval);
    std::deque<MetricsReadback::Window> done;
    EpochStats s;
    s.epoch = epoch;
    double loss_sum = 0;
    int64_t correct = 0, samples = 0, step = 0;
    const int64_t epoch_start = m.global_step;  // step s of the epoch ran at lr(epoch_start + s - 1)
    auto lr_of_step = [&](int64_t s) { return m.schedule->lr(epoch_start + s - 1); };
    // Folds completed read-backs into the epoch's figures (throwing on NaN/inf or bad labels)
    // and reports progress.
    auto consume = [&] {
      while (!done.empty()) {
        const MetricsReadback::Window w = done.front();
        done.pop_front();
        check_window(w, epoch, lr_of_step);
        loss_sum += w.loss_sum;
        correct += w.correct;
        samples += w.samples;
        if (cb.on_step) cb.on_step(w.last_step, w.samples ? w.loss_sum / static_cast<double>(w.samples) : 0, samples);
      }
    };
    const auto t0 = Clock::now();
    Tensor images, labels;
    // Each step's span is recorded when the next one starts; the last one ends once the
    // epoch's device work is read back, so that the steps cover all of the epoch's device
    // time even though the host runs up to 2K steps ahead of the device.
    int64_t step_begin = -1, step_end = -1;
    try {
      for (;;) {
        const int64_t t_wait = profile::now_ns();
        if (!m.train_feed->next(images, labels)) break;
        const int64_t t_step = profile::now_ns();
        if (step_begin >= 0) profile::Profiler::global().record(profile::Stage::step, "step", step_begin, step_end);
        profile::Profiler::global().record(profile::Stage::wait_data, "wait for batch", t_wait, t_step);
        const double lr = m.schedule->lr(m.global_step);
        m.optimizer->set_lr(lr);
        m.optimizer->zero_grad();
        {
          profile::ScopedSpan span(profile::Stage::forward, "forward");
          Tensor logits = m.model->forward(images);
          m.loss_fn.forward_accumulate(logits, labels, metrics.accumulator());  // no host read-back
        }
        {
          profile::ScopedSpan span(profile::Stage::backward, "backward");
          m.model->backward(m.loss_fn.backward());
        }
        {
          profile::ScopedSpan span(profile::Stage::optimizer, "optimizer");
          m.optimizer->step();
        }
        ++m.global_step;
        ++step;
        s.lr = lr;
        // Every `interval` steps: read the metrics back asynchronously; fold in those that arrived.
        metrics.step_done(step, done);
        metrics.poll(done);
        consume();
        step_begin = t_wait;
        step_end = profile::now_ns();
        if (m.tuner) m.tuner->step_done();
      }
    } catch (const Error& e) {
      // The allocator names the size and the device; say where the run was and what helps.
      if (e.code() != ErrorCode::out_of_memory) throw;
      throw_error(ErrorCode::out_of_memory, "train",
                  fmt::format("out of memory in step {} of epoch {}: {}; lower --batch-size", step + 1, epoch, e.what()));
    }
    metrics.finish(step, done);
    if (step_begin >= 0) profile::Profiler::global().record(profile::Stage::step, "step", step_begin, profile::now_ns());
    consume();
    images = labels = Tensor();
    m.train_feed->release();
    s.seconds = seconds_since(t0);
    s.train_loss = samples ? loss_sum / static_cast<double>(samples) : 0;
    s.train_accuracy = samples ? static_cast<double>(correct) / static_cast<double>(samples) : 0;
    s.images_per_s = s.seconds > 0 ? static_cast<double>(samples) / s.seconds : 0;
    train_seconds += s.seconds;
    train_images += samples;
    const EvalResult e = evaluate();
    s.test_loss = e.loss;
    s.test_accuracy = e.accuracy;
    s.pinned_peak_bytes = pinned_allocator().stats().peak_reserved_bytes;
    if (s.test_accuracy > result.best_test_accuracy || result.best_epoch == 0) {
      result.best_test_accuracy = s.test_accuracy;
      result.best_epoch = epoch;
    }
    result.epochs.push_back(s);
    if (cb.on_epoch_end) cb.on_epoch_end(s);
  }
  result.wall_seconds = seconds_since(t_fit);
  result.images_per_s = train_seconds > 0 ? static_cast<double>(train_images) / train_seconds : 0;
  result.num_workers = m.train_feed->loader().num_workers();
  result.prefetch_factor = m.train_feed->loader().prefetch_factor();
  result.prefetch_depth = m.train_feed->prefetcher() ? m.train_feed->prefetcher()->prefetch_depth() : 0;
  if (m.tuner) result.autotune = m.tuner->describe();
  return result;
}

void Trainer::save_weights(const std::string& path) {
  impl_->optimizer->flush();
  NamedTensors out;
  for (const nn::NamedTensor& t : impl_->model->host_state_dict()) out.emplace_back(t.name, t.tensor);
  save_safetensors(path, out, {{"format", "pt"}, {"model", impl_->cfg.model}});
}

void load_state(nn::Module& module, const NamedTensors& state, const std::string& source) {
  for (const nn::NamedTensor& t : module.state_dict()) {
    const Tensor& src = find_tensor(state, t.name, source);
    TD_CHECK(src.shape() == t.tensor.shape(), ErrorCode::format, "weights",
             "{}: tensor '{}' has shape {}, expected {}", source, t.name, shape_str(src.shape()),
             shape_str(t.tensor.shape()));
    TD_CHECK(src.dtype() == t.tensor.dtype(), ErrorCode::format, "weights", "{}: tensor '{}' is {}, expected {}",
             source, t.name, dtype_name(src.dtype()), dtype_name(t.tensor.dtype()));
    Tensor dst = t.tensor;
    dst.copy_from(src);
  }
}

profile::SummaryOptions summary_options(const TrainConfig& cfg, const TrainResult& r) {
  profile::SummaryOptions o;
  o.num_workers = r.num_workers;
  o.cores = available_cores();
  o.batch_size = cfg.batch_size;
  o.prefetch_factor = r.prefetch_factor;
  o.prefetch_depth = r.prefetch_depth;
  o.autotuned = cfg.num_workers < 0;  // the worker count was chosen by the autotuner
  return o;
}

EvalResult evaluate_weights(const TrainConfig& cfg) {
  validate(cfg, "eval");
  const Device device = resolve_device(cfg.device);
  set_threads(cfg.threads);
  nn::ModulePtr model = nn::make_model(cfg.model, cfg.seed);
  std::map<std::string, std::string> metadata;
  const NamedTensors weights = load_safetensors(cfg.weights, &metadata);
  // tandem records the model in the file: name a mismatch rather than the first odd tensor.
  const auto saved = metadata.find("model");
  if (saved != metadata.end() && saved->second != cfg.model) {
    const std::vector<std::string> names = nn::model_names();
    if (std::find(names.begin(), names.end(), saved->second) != names.end())
      throw_error(ErrorCode::invalid_argument, "eval",
                  fmt::format("{} holds weights of model '{}', expected '{}' (--model): pass --model {}", cfg.weights,
                              saved->second, cfg.model, saved->second));
    throw_error(ErrorCode::format, "eval",
                fmt::format("{} records model '{}', which tandem does not know: expected one of {}", cfg.weights,
                            saved->second.substr(0, 64), fmt::join(names, ", ")));
  }
  load_state(*model, weights, cfg.weights);
  if (!device.is_host()) model->to(device);
  auto test_set = load_split(cfg.data_dir, "t10k", cfg.model);
  auto feed = make_test_feed(test_set, pipeline_start(cfg), device, "eval", "test batches: lower --batch-size");
  struct Drain {  // also when run_eval throws
    Device device;
    ~Drain() { drain_device(device); }
  } drain{device};
  return run_eval(*model, *feed, device, cfg.log_interval);
}

}  // namespace tandem::train
