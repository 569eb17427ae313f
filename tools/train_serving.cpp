// tandem train --serve HOST:PORT: the inference service beside the training run (serving.h).
#include <fmt/format.h>

#include "serving.h"
#include "tandem/pinned.h"
#include "tandem/profile/profiler.h"
#include "tandem/stream.h"
#include "train/run_builder.h"

namespace tandem::tools {

namespace {

int64_t publish_every() {
  const int64_t every = serving_flags().publish_every;
  TD_CHECK_ARG(every >= 1, "train", "--publish-every: expected at least 1 step, got {}", every);
  return every;
}

}  // namespace

TrainServing::TrainServing(train::Trainer& trainer, const train::TrainConfig& cfg) : trainer_(trainer), cfg_(cfg) {
  const ServingFlags& f = serving_flags();
  publish_every();
  train::ModelCard card = trainer.model_card();
  language_model_ = card.language_model();
  TD_CHECK_ARG(!language_model_ || cfg.online_mix == 0, "train",
               "--online-mix {}: a language model takes no samples from /v1/samples (expected 0)",
               cfg.online_mix);
  if (!language_model_) {  // images: POST /v1/samples fills the online buffer
    const int64_t numel = card.spec.channels * card.spec.height * card.spec.width;
    online_ = std::make_shared<serve::OnlineBuffer>(f.online_buffer, numel, card.spec.num_classes,
                                                    cfg.seed);
  }
  server_ = std::make_unique<serve::InferenceServer>(std::move(card), f.options, online_, cfg.online_mix);
  if (cfg.online_mix > 0) trainer.set_online_source(online_);
  publish(0, -1);
  server_->start();
  write_port_file(f.port_file, server_->port());
  if (language_model_)
    fmt::print(
        "serving on http://{}:{}: POST /v1/completions, generation on {}, a new version every {} "
        "steps and "
        "after each evaluation\n",
        server_->host(), server_->port(), server_->device_text(), f.publish_every);
  else
    fmt::print(
        "serving on http://{}:{}: inference on {}, a new version every {} steps and after each "
        "evaluation, "
        "online buffer {} samples, --online-mix {}\n",
        server_->host(), server_->port(), server_->device_text(), f.publish_every, f.online_buffer,
        cfg.online_mix);
  std::fflush(stdout);
}

TrainServing::~TrainServing() = default;

void TrainServing::publish(int64_t step, double test_accuracy) {
  auto w = std::make_shared<serve::ServedWeights>();
  w->version = step;
  w->test_accuracy = test_accuracy;
  w->weights = trainer_.capture_weights();
  w->published_ns = profile::now_ns();
  server_->publish(std::move(w));
  ++published_;
}

void TrainServing::attach(train::TrainCallbacks& cb) {
  const int64_t every = serving_flags().publish_every;
  auto step_done = cb.on_step_done;
  cb.on_step_done = [this, every, step_done](int64_t step) {
    if (step_done) step_done(step);
    last_step_ = step;
    if (step % every == 0) publish(step, -1);
  };
  auto window = cb.on_window;
  cb.on_window = [this, window](const train::WindowStats& w) {
    if (window) window(w);
    gauges_.step = w.global_step;
    gauges_.loss = w.loss;
    gauges_.accuracy = w.accuracy;
    gauges_.images_per_s = w.samples_per_s;
    gauges_.data_wait_share = w.data_wait_share;
    gauges_.pinned_pool_bytes = static_cast<int64_t>(pinned_allocator().stats().reserved_bytes);
    const Device d = DeviceSpec::parse(cfg_.device).device;
    if (!d.is_host()) gauges_.device_pool_bytes = static_cast<int64_t>(runtime_for(d).allocator(d.index).stats().reserved_bytes);
    server_->metrics().set_training(gauges_);
  };
  auto epoch_end = cb.on_epoch_end;
  cb.on_epoch_end = [this, epoch_end](const train::EpochStats& s) {
    if (epoch_end) epoch_end(s);
    gauges_.test_accuracy = s.test_accuracy;
    server_->metrics().set_training(gauges_);
    publish(last_step_, s.test_accuracy);  // the evaluated weights, with their accuracy
  };
}

void follow_publishing(train::Trainer& trainer, train::TrainCallbacks& cb) {
  const int64_t every = publish_every();
  trainer.capture_weights();  // version 0, published before training
  cb.on_step_done = [&trainer, every, next = cb.on_step_done](int64_t step) {
    if (next) next(step);
    if (step % every == 0) trainer.capture_weights();
  };
  cb.on_epoch_end = [&trainer, next = cb.on_epoch_end](const train::EpochStats& s) {
    if (next) next(s);
    trainer.capture_weights();  // the evaluated weights
  };
}

void TrainServing::finish() {
  server_->stop();
  const serve::ServeMetrics& m = server_->metrics();
  if (language_model_)
    fmt::print("served {} completion requests, {} versions published\n",
               m.requests("/v1/completions"), published_);
  else
    fmt::print(
        "served {} predict requests, {} versions published, {} samples taken ({} mixed into "
        "training)\n",
        m.requests("/v1/predict"), published_, online_->added(), online_->drawn());
  if (m.swaps() > 0)
    fmt::print("publish to first answer: last {:.1f} ms, longest {:.1f} ms over {} versions answered\n",
               1e3 * m.last_publish_to_answer_s(), 1e3 * m.max_publish_to_answer_s(), m.swaps());
}

}  // namespace tandem::tools
