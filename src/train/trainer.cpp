#include "tandem/train/trainer.h"

#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "tandem/data/fused_image_transform.h"
#include "tandem/data/loader.h"
#include "tandem/data/mnist_like.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/models.h"
#include "tandem/ops.h"
#include "tandem/optim/optimizer.h"
#include "tandem/optim/schedule.h"
#include "tandem/profile/profiler.h"
#include "tandem/safetensors.h"
#include "tandem/thread_pool.h"

namespace tandem::train {

using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Checks the device flag: only cpu trains in this build; other kinds say why not.
static Device resolve_device(const std::string& text) {
  DeviceSpec spec = DeviceSpec::parse(text);
  if (spec.device.kind != DeviceKind::cpu) {
    runtime_for(spec.device);  // throws "built without CUDA" / "no CUDA device found"
    throw_error(ErrorCode::not_available, "train",
                fmt::format("--device {}: training on {} is not supported yet (use --device cpu)", text,
                            device_kind_name(spec.device.kind)));
  }
  return spec.device;
}

static void set_threads(int threads) { ops::set_num_threads(threads > 0 ? threads : available_cores()); }

static std::unique_ptr<data::Loader> make_test_loader(const std::shared_ptr<const data::Dataset>& set,
                                                      const TrainConfig& cfg) {
  data::LoaderOptions lo;
  lo.batch_size = cfg.eval_batch_size;
  lo.num_workers = cfg.num_workers;
  lo.prefetch_factor = cfg.prefetch_factor;
  lo.drop_last = false;  // every test sample counts exactly once
  lo.shuffle = false;
  auto tf = std::make_shared<data::FusedImageTransform>(data::FusedImageTransform::fashion_mnist_eval());
  return std::make_unique<data::Loader>(set, tf, lo);
}

static EvalResult run_eval(nn::Module& model, data::Loader& loader) {
  model.eval();
  nn::CrossEntropyLoss loss_fn;
  EvalResult r;
  double loss_sum = 0;
  loader.begin_epoch(0);
  data::Batch b;
  while (loader.next(b)) {
    Tensor logits = model.forward(b.images);
    const double l = loss_fn.forward(logits, b.labels).item();
    loss_sum += l * static_cast<double>(b.size());
    r.correct += ops::count_correct(logits, b.labels);
    r.samples += b.size();
  }
  r.loss = r.samples ? loss_sum / static_cast<double>(r.samples) : 0;
  r.accuracy = r.samples ? static_cast<double>(r.correct) / static_cast<double>(r.samples) : 0;
  return r;
}

struct Trainer::Impl {
  TrainConfig cfg;
  Device device;
  std::shared_ptr<data::MnistLike> train_set, test_set;
  std::unique_ptr<data::Loader> train_loader, test_loader;
  nn::ModulePtr model;
  std::vector<nn::Parameter*> params;
  nn::CrossEntropyLoss loss_fn;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::LrSchedule> schedule;
  int64_t global_step = 0;
};

Trainer::Trainer(const TrainConfig& cfg) : impl_(std::make_unique<Impl>()) {
  validate(cfg);
  Impl& m = *impl_;
  m.cfg = cfg;
  m.device = resolve_device(cfg.device);
  set_threads(cfg.threads);
  m.model = nn::make_model(cfg.model, cfg.seed);
  m.params = m.model->parameters();
  m.loss_fn = nn::CrossEntropyLoss(static_cast<float>(cfg.label_smoothing));
  m.train_set = std::make_shared<data::MnistLike>(cfg.data_dir, "train");
  m.test_set = std::make_shared<data::MnistLike>(cfg.data_dir, "t10k");

  data::LoaderOptions lo;
  lo.batch_size = cfg.batch_size;
  lo.num_workers = cfg.num_workers;
  lo.prefetch_factor = cfg.prefetch_factor;
  lo.drop_last = true;
  lo.shuffle = true;
  lo.seed = cfg.seed;
  auto tf = std::make_shared<data::FusedImageTransform>(cfg.augment ? data::FusedImageTransform::fashion_mnist_train()
                                                                    : data::FusedImageTransform::fashion_mnist_eval());
  m.train_loader = std::make_unique<data::Loader>(m.train_set, tf, lo);
  TD_CHECK_ARG(m.train_loader->num_batches() > 0, "train",
               "--batch-size {} is larger than the {} training samples (drop_last leaves no batch)", cfg.batch_size,
               m.train_set->size());
  m.test_loader = make_test_loader(m.test_set, cfg);

  optim::OptimizerOptions oo;
  oo.lr = cfg.lr;
  oo.weight_decay = cfg.weight_decay;
  oo.momentum = cfg.momentum;
  oo.nesterov = cfg.nesterov;
  oo.betas = {cfg.beta1, cfg.beta2};
  oo.eps = cfg.eps;
  m.optimizer = optim::make_optimizer(cfg.optimizer, m.params, oo);

  const int64_t steps_per_epoch = m.train_loader->num_batches();
  optim::ScheduleOptions so;
  so.lr = cfg.lr;
  so.total_steps = steps_per_epoch * cfg.epochs;
  so.warmup_steps = static_cast<int64_t>(std::llround(cfg.warmup_epochs * static_cast<double>(steps_per_epoch)));
  so.step_size = steps_per_epoch * cfg.step_size_epochs;
  so.gamma = cfg.gamma;
  m.schedule = optim::make_schedule(cfg.schedule, so);
}

Trainer::~Trainer() = default;

nn::Module& Trainer::model() { return *impl_->model; }

std::string Trainer::describe() const {
  const Impl& m = *impl_;
  return fmt::format(
      "tandem train: model {} ({} parameters) on {}, {} train / {} test samples from {}, batch {}, {} lr {} "
      "weight_decay {}, {} schedule, {} epochs, {} threads, {} loader workers",
      m.cfg.model, m.model->num_parameters(), m.device.str(), m.train_set->size(), m.test_set->size(),
      m.cfg.data_dir, m.cfg.batch_size, m.cfg.optimizer, m.cfg.lr, m.cfg.weight_decay, m.cfg.schedule,
      m.cfg.epochs, ops::get_num_threads(), m.cfg.num_workers);
}

EvalResult Trainer::evaluate() { return run_eval(*impl_->model, *impl_->test_loader); }

TrainResult Trainer::fit(const TrainCallbacks& cb) {
  Impl& m = *impl_;
  TrainResult result;
  const auto t_fit = Clock::now();
  double train_seconds = 0;
  int64_t train_images = 0;
  for (int epoch = 1; epoch <= m.cfg.epochs; ++epoch) {
    const int64_t steps = m.train_loader->num_batches();
    if (cb.on_epoch_begin) cb.on_epoch_begin(epoch, steps);
    m.model->train();
    m.train_loader->begin_epoch(static_cast<uint64_t>(epoch - 1));
    EpochStats s;
    s.epoch = epoch;
    double loss_sum = 0;
    int64_t correct = 0, samples = 0, step = 0;
    const auto t0 = Clock::now();
    data::Batch b;
    for (;;) {
      const int64_t t_wait = profile::now_ns();
      if (!m.train_loader->next(b)) break;
      const int64_t t_step = profile::now_ns();
      profile::Profiler::global().record(profile::Stage::wait_data, "wait for batch", t_wait, t_step);
      const double lr = m.schedule->lr(m.global_step);
      m.optimizer->set_lr(lr);
      m.optimizer->zero_grad();
      double loss;
      Tensor logits;
      {
        profile::ScopedSpan span(profile::Stage::forward, "forward");
        logits = m.model->forward(b.images);
        loss = m.loss_fn.forward(logits, b.labels).item();
      }
      if (!std::isfinite(loss)) {
        throw_error(ErrorCode::numerical, "train",
                    fmt::format("loss is {} at epoch {} step {} (lr {:.3g}): expected a finite loss; lower --lr "
                                "or check the data",
                                std::isnan(loss) ? "NaN" : "infinite", epoch, step + 1, lr));
      }
      correct += ops::count_correct(logits, b.labels);
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
      samples += b.size();
      loss_sum += loss * static_cast<double>(b.size());
      s.lr = lr;
      profile::Profiler::global().record(profile::Stage::step, "step", t_wait, profile::now_ns());
      if (cb.on_step) cb.on_step(step, loss, samples);
    }
    b.release();
    s.seconds = seconds_since(t0);
    s.train_loss = samples ? loss_sum / static_cast<double>(samples) : 0;
    s.train_accuracy = samples ? static_cast<double>(correct) / static_cast<double>(samples) : 0;
    s.images_per_s = s.seconds > 0 ? static_cast<double>(samples) / s.seconds : 0;
    train_seconds += s.seconds;
    train_images += samples;
    const EvalResult e = evaluate();
    s.test_loss = e.loss;
    s.test_accuracy = e.accuracy;
    if (s.test_accuracy > result.best_test_accuracy || result.best_epoch == 0) {
      result.best_test_accuracy = s.test_accuracy;
      result.best_epoch = epoch;
    }
    result.epochs.push_back(s);
    if (cb.on_epoch_end) cb.on_epoch_end(s);
  }
  result.wall_seconds = seconds_since(t_fit);
  result.images_per_s = train_seconds > 0 ? static_cast<double>(train_images) / train_seconds : 0;
  return result;
}

void Trainer::save_weights(const std::string& path) {
  NamedTensors out;
  for (const nn::NamedTensor& t : impl_->model->state_dict()) out.emplace_back(t.name, t.tensor);
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

EvalResult evaluate_weights(const TrainConfig& cfg) {
  validate(cfg);
  resolve_device(cfg.device);
  set_threads(cfg.threads);
  nn::ModulePtr model = nn::make_model(cfg.model, cfg.seed);
  load_state(*model, load_safetensors(cfg.weights), cfg.weights);
  auto test_set = std::make_shared<data::MnistLike>(cfg.data_dir, "t10k");
  auto loader = make_test_loader(test_set, cfg);
  return run_eval(*model, *loader);
}

}  // namespace tandem::train
