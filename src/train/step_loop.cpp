#include "train/step_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <string>

#include <fmt/format.h>

#include "tandem/amp_ops.h"
#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/profile/profiler.h"
#include "train/metrics_readback.h"
#include "train/place/placed_update.h"

namespace tandem::train {

namespace {

using Clock = std::chrono::steady_clock;
using Window = MetricsReadback::Window;

// Folds completed read-backs into the epoch's figures, throwing when a window saw labels
// outside the model's classes or a non-finite loss (the run stops; nothing is saved), and
// reports progress.
class EpochTally {
 public:
  // `computed`: false on a device that does not compute (Run::planning): the windows then hold
  // whatever the device memory held, so they are neither checked nor summed; the samples are
  // the host's count and the loss is NaN.
  // `tokens_per_sample`: data::tokens_per_sample of the training fields (0 for images).
  // `rows_per_sample`: the loss rows the metrics count per sample (the target field's elements:
  // 1 for a label, T for a language model's next tokens); loss and accuracy are per row, the
  // sample counts and rates are rows / rows_per_sample.
  EpochTally(int epoch, const optim::LrSchedule& schedule, int64_t epoch_start, const TrainCallbacks& cb,
             bool computed, StepObserver* observer, int64_t tokens_per_sample, int64_t rows_per_sample)
      : epoch_(epoch), schedule_(schedule), epoch_start_(epoch_start), cb_(cb), computed_(computed),
        observer_(observer), tokens_per_sample_(tokens_per_sample), rows_per_sample_(rows_per_sample) {}

  /// Samples of `rows` loss rows, and rows of `samples` samples.
  int64_t samples_of(int64_t rows) const { return rows / rows_per_sample_; }
  int64_t rows_of(int64_t samples) const { return samples * rows_per_sample_; }

  void consume(std::deque<Window>& done) {
    if (cb_.on_window && computed_ && !done.empty()) report_windows(done);  // planning: no figures
    while (!done.empty()) {
      const Window w = done.front();
      done.pop_front();
      if (!computed_) {
        loss_sum = NAN;
        samples = host_samples;
        if (cb_.on_step) cb_.on_step(w.last_step, NAN, samples_of(samples));
        continue;
      }
      check(w);
      if (w.has_scaler) {
        scaled = true;
        scale = w.scale;
        skipped_total = w.skipped_steps;
      }
      loss_sum += w.loss_sum;
      correct += w.correct;
      samples += w.samples;
      if (observer_) observer_->window_done(w.last_step, loss_sum, correct, samples);
      if (cb_.on_step)
        cb_.on_step(w.last_step, w.samples ? w.loss_sum / static_cast<double>(w.samples) : 0, samples_of(samples));
    }
  }

  double loss_sum = 0;
  int64_t correct = 0, samples = 0;
  int64_t host_samples = 0;  // loss rows of the steps run (samples x rows per sample), counted by the host
  bool scaled = false;       // a loss scaler's state rode on the read-backs
  float scale = 0;
  int64_t skipped_total = 0;  // the scaler's skipped steps at the last read-back (whole run)
  int64_t wait_ns = 0;  // the training thread's waits for batches this epoch (the step loop adds)

 private:
  // on_window for the windows that arrived, before they are checked (a NaN window is reported
  // too); the host's rate and data-wait share are shared by the windows that arrive together.
  void report_windows(const std::deque<Window>& done) {
    const int64_t now = profile::now_ns();
    int64_t n = 0;
    for (const Window& w : done) n += w.samples;
    const double dt = static_cast<double>(now - last_ns_) * 1e-9;
    WindowStats ws;
    ws.epoch = epoch_;
    ws.samples_per_s = dt > 0 ? static_cast<double>(samples_of(n)) / dt : 0;
    ws.tokens_per_s = ws.samples_per_s * static_cast<double>(tokens_per_sample_);
    ws.data_wait_share = dt > 0 ? std::min(1.0, static_cast<double>(wait_ns - last_wait_ns_) * 1e-9 / dt) : 0;
    for (const Window& w : done) {
      ws.step = w.last_step;
      ws.global_step = epoch_start_ + w.last_step;
      ws.samples = samples_of(w.samples);
      ws.loss = w.samples ? w.loss_sum / static_cast<double>(w.samples) : 0;
      ws.accuracy = w.samples ? static_cast<double>(w.correct) / static_cast<double>(w.samples) : 0;
      ws.lr = lr_of_step(w.last_step);
      cb_.on_window(ws);
    }
    last_ns_ = now;
    last_wait_ns_ = wait_ns;
  }
  int64_t last_ns_ = profile::now_ns(), last_wait_ns_ = 0;

  // Step s of the epoch ran at lr(epoch_start + s - 1).
  double lr_of_step(int64_t s) const { return schedule_.lr(epoch_start_ + s - 1); }

  void check(const Window& w) const {
    const std::string steps = w.first_step == w.last_step ? fmt::format("step {}", w.first_step)
                                                           : fmt::format("steps {}..{}", w.first_step, w.last_step);
    TD_CHECK(w.bad_labels == 0, ErrorCode::invalid_argument, "train",
             "{} label(s) outside the model's classes in {} of epoch {}: expected labels in [0, classes)",
             w.bad_labels, steps, epoch_);
    if (std::isfinite(w.loss_sum)) return;
    const double lr0 = lr_of_step(w.first_step), lr1 = lr_of_step(w.last_step);
    const std::string lr = lr0 == lr1 ? fmt::format("lr {:.3g}", lr0) : fmt::format("lr {:.3g} to {:.3g}", lr0, lr1);
    throw_error(ErrorCode::numerical, "train",
                fmt::format("loss is {} in {} of epoch {} ({}): expected a finite loss; lower --lr or check the data",
                            std::isnan(w.loss_sum) ? "NaN" : "infinite", steps, epoch_, lr));
  }

  int epoch_;
  const optim::LrSchedule& schedule_;
  int64_t epoch_start_;
  const TrainCallbacks& cb_;
  bool computed_;
  StepObserver* observer_;
  int64_t tokens_per_sample_;
  int64_t rows_per_sample_;
};

// The update from the model's gradients (a split's: the combined ones): with a loss scaler
// the gradients are unscaled once (before clipping) and the optimizer step is gated on the
// device's inf/NaN check (LossScaler::step); --clip-grad-norm clips the unscaled gradients.
void update_weights(Run& r) {
  if (r.placed_update) return r.placed_update->update(r);  // gradients on several devices
  if (r.home->checks_updates()) {  // checked (and clipped) on the host, after speculative updates
    r.home->update();
    if (r.scaler) {
      r.scaler->set_found_inf(r.home->step_skipped());
      r.scaler->update();
    }
    return;
  }
  if (r.grad_norm.defined()) {
    if (r.scaler) r.scaler->unscale_(r.params);  // once, before clipping
    r.home->clip_grad_norm(r.params, r.cfg.clip_grad_norm, r.grad_norm);
  }
  if (r.scaler && r.home->gates_on_host()) {  // the averaged gradients: every rank reads one verdict
    if (!r.scaler->check_on_host(r.params)) r.home->update();
    r.scaler->update();
  } else if (r.scaler) {
    // The schedule's clock is the optimizer's count of steps that ran (skipped ones excluded).
    const optim::LrSchedule& schedule = *r.schedule;
    r.scaler->step(r.optimizer(), [&schedule](int64_t steps_done) { return schedule.lr(steps_done); });
    r.scaler->update();
  } else {
    r.home->update();
  }
}

// Micro-batch `k` of a step of `count` at learning rate `lr`: forward, loss into `metrics` (no
// host read-back), backward; the gradients are zeroed before the step's first micro-batch and
// accumulate over the others (the home takes them during the last one's backward only). With a
// loss scaler the loss gradient is scaled in f32 before it is rounded to the compute dtype; the
// gradients are unscaled once (before clipping), and the optimizer step is gated on the device's
// inf/NaN check (LossScaler::step): no host sync anywhere.
void micro_step(Run& r, const data::FieldBatch& batch, double lr, int64_t k, int64_t count, const Tensor& metrics) {
  const Tensor& input = batch.get(data::FieldRole::input);
  const Tensor& target = batch.get(data::FieldRole::target);
  if (k == 0) r.home->begin_step(lr);  // a host update runs during backward: the lr is set before it
  r.home->begin_micro_batch(k, count);
  if (r.model->fuses_loss()) {  // a language model's fused classifier + cross-entropy (scaled in the op)
    {
      profile::ScopedSpan span(profile::Stage::forward, "forward");
      r.model->loss_forward(input, target, metrics, r.scaler ? r.scaler->state() : Tensor());
    }
    profile::ScopedSpan span(profile::Stage::backward, "backward");
    r.model->loss_backward();
    r.home->backward_done();
  } else {
    {
      profile::ScopedSpan span(profile::Stage::forward, "forward");
      Tensor logits = r.model->forward(input);
      r.loss_fn.forward_accumulate(logits, target, metrics);
    }
    profile::ScopedSpan span(profile::Stage::backward, "backward");
    Tensor g;
    if (r.scaler) {
      const Tensor g32 = r.loss_fn.backward_f32();
      if (!r.scaled_grad.defined() || r.scaled_grad.shape() != g32.shape())
        r.scaled_grad = Tensor::empty(g32.shape(), r.compute_dtype, r.device);
      r.scaler->scale_loss_grad(g32, r.scaled_grad);
      g = r.scaled_grad;
    } else {
      g = r.loss_fn.backward();
    }
    r.model->backward(g);
    r.home->backward_done();  // the last buckets; the optimizer waits for all of them
  }
}

// The update after the step's micro-batches: the home averages the summed gradients over the
// K micro-batches first (the mean over their losses; ParamHome::average_micro_batches).
void average_and_update(Run& r) {
  r.home->average_micro_batches();
  update_weights(r);
}

// Waits for micro-batch k (> 0) of step `step` (0-based) of `count`: `next` takes it, false
// when the epoch ended (steps_in_epoch counts whole steps only, so it never does).
template <typename Next>
void next_micro_batch(EpochTally& tally, int64_t step, int64_t k, int64_t count, Next&& next) {
  const int64_t t0 = profile::now_ns();
  TD_CHECK(next(), ErrorCode::internal, "train", "the epoch ended inside step {} (micro-batch {} of {})", step + 1,
           k + 1, count);
  tally.wait_ns += profile::now_ns() - t0;
}

// One step of --grad-accum-steps micro-batches on one device (or a placement), the first in
// `batch` (the feed's current batch; the others are taken here). --online-mix replaces samples
// of every micro-batch, its draw keyed by global_step * count + k (the global step when count is 1).
void device_step(Run& r, const data::FieldBatch*& batch, double lr, const Tensor& metrics, EpochTally& tally,
                 int64_t step, int64_t global_step) {
  const int64_t count = r.cfg.grad_accum_steps;
  for (int64_t k = 0; k < count; ++k) {
    if (k > 0) next_micro_batch(tally, step, k, count, [&] { return (batch = r.train_feed->next()) != nullptr; });
    if (r.online) r.online->mix(*batch, static_cast<uint64_t>(global_step * count + k));
    micro_step(r, *batch, lr, k, count, metrics);
    tally.host_samples += tally.rows_of(batch->samples());
  }
  profile::ScopedSpan span(profile::Stage::optimizer, "optimizer");
  average_and_update(r);
}

// The same step with the batch split between devices: each replica sums its parts of the
// micro-batches; the combine and the update run once. --online-mix writes the host batch.
void split_step(Run& r, double lr, const Tensor& metrics, EpochTally& tally, int64_t step, int64_t global_step) {
  const int64_t count = r.cfg.grad_accum_steps;
  r.split->begin_step(r.optimizer(), lr, metrics);
  for (int64_t k = 0; k < count; ++k) {
    if (k > 0) next_micro_batch(tally, step, k, count, [&] { return r.split->next(r.train_feed->loader()); });
    r.home->begin_micro_batch(k, count);
    if (r.online) r.online->mix(r.split->host_batch(), static_cast<uint64_t>(global_step * count + k));
    r.split->micro_batch();
    tally.host_samples += tally.rows_of(r.split->batch_samples());
  }
  r.split->finish_step([&r] {
    r.home->backward_done();  // under mpirun: the combined gradients' all-reduce
    average_and_update(r);
  });
}

// Runs the epoch's steps; returns how many ran. `lr` is set to the last step's.
int64_t run_steps(Run& r, int epoch, int64_t& global_step, MetricsReadback& metrics, EpochTally& tally,
                  double& lr, int64_t first_batch, StepObserver* observer, Clock::time_point t0, double seconds0,
                  const TrainCallbacks& cb) {
  profile::Profiler& prof = profile::Profiler::global();
  std::deque<Window> done;
  const data::FieldBatch* batch = nullptr;  // the feed's current batch (single device)
  int64_t step = first_batch;
  StepView view;
  view.epoch = epoch;
  view.steps_in_epoch = r.steps_per_epoch();
  const int64_t max_steps = r.cfg.max_steps;
  view.accumulator = &metrics.accumulator();
  view.drain = [&] {
    metrics.wait_all(done);
    tally.consume(done);
  };
  // Each step's span is recorded when the next one starts; the last one ends once the
  // epoch's device work is read back, so that the steps cover all of the epoch's device
  // time even though the host runs up to 2K steps ahead of the device.
  int64_t step_begin = -1, step_end = -1;
  try {
    for (;;) {
      // --max-steps ends the run here; the batches short of a whole step end the epoch.
      if ((max_steps > 0 && global_step >= max_steps) || step >= view.steps_in_epoch) break;
      const int64_t t_wait = profile::now_ns();
      if (r.split ? !r.split->next(r.train_feed->loader()) : !(batch = r.train_feed->next())) break;
      const int64_t t_step = profile::now_ns();
      if (step_begin >= 0) prof.record(profile::Stage::step, "step", step_begin, step_end);
      prof.record(profile::Stage::wait_data, "wait for batch", t_wait, t_step);
      tally.wait_ns += t_step - t_wait;
      // Skipped steps (a loss scaler's) do not advance the schedule: with the checks on the host the
      // count of steps that ran is known here (a gated device step reads it where it runs).
      const bool host_verdict = r.scaler && (r.home->checks_updates() || r.home->gates_on_host());
      lr = r.schedule->lr(host_verdict ? r.optimizer().step_count() : global_step);
      if (r.split) {
        split_step(r, lr, metrics.accumulator(), tally, step, global_step);
      } else {
        device_step(r, batch, lr, metrics.accumulator(), tally, step, global_step);
      }
      ++global_step;
      ++step;
      // Every `interval` steps: read the metrics back asynchronously; fold in those that arrived.
      metrics.step_done(step, done);
      metrics.poll(done);
      tally.consume(done);
      step_begin = t_wait;
      step_end = profile::now_ns();
      if (r.tuner) r.tuner->step_done();
      // Evaluation first: it flushes a delayed host update into the weights (ParamHome::flush),
      // which changes the following steps, so a checkpoint of this step is taken after it, as
      // at the end of an epoch, and a resumed run goes on from the same state.
      if (r.cfg.eval_interval > 0 && global_step % r.cfg.eval_interval == 0 && r.evaluate_at) {
        r.evaluate_at(epoch, global_step);
        r.model->train();
      }
      if (observer) {
        view.step = step;
        view.global_step = global_step;
        view.read_through = metrics.read_through();
        view.seconds = seconds0 + std::chrono::duration<double>(Clock::now() - t0).count();
        observer->after_step(view);
      }
      if (cb.on_step_done) cb.on_step_done(global_step);
    }
  } catch (const Error& e) {
    // The allocator names the size and the device; say where the run was and what helps.
    if (e.code() != ErrorCode::out_of_memory) throw;
    throw_error(ErrorCode::out_of_memory, "train",
                fmt::format("out of memory in step {} of epoch {}: {}; lower --batch-size", step + 1, epoch, e.what()));
  }
  if (r.split) r.split->end_epoch();
  metrics.finish(step, done);
  if (step_begin >= 0) prof.record(profile::Stage::step, "step", step_begin, profile::now_ns());
  tally.consume(done);
  r.train_feed->release();
  return step;
}

}  // namespace

EpochTraining train_epoch(Run& r, int epoch, int64_t& global_step, const TrainCallbacks& cb,
                          const EpochStart* start, StepObserver* observer) {
  const int64_t steps = r.steps_per_epoch();
  if (cb.on_epoch_begin) cb.on_epoch_begin(epoch, steps);
  r.model->train();
  const EpochStart none;
  if (!start) start = &none;
  // The feed counts micro-batches: step s starts at batch s * grad_accum_steps.
  r.train_feed->begin_epoch(static_cast<uint64_t>(epoch - 1),
                            start->first_batch * r.cfg.grad_accum_steps);
  if (r.tuner) r.tuner->begin_epoch();
  if (r.split) r.split->begin_epoch();
  MetricsReadback metrics(r.device, r.train_stream(),
                          r.cfg.log_interval);
  // A resumed epoch: step s of the epoch ran at lr(epoch_start + s - 1) as before.
  const int64_t tokens = data::tokens_per_sample(r.train_feed->loader().fields());
  const std::vector<data::Field>& fields = r.train_feed->loader().fields();
  const int target = data::find_field(fields, data::FieldRole::target);
  const int64_t rows = target >= 0 ? std::max<int64_t>(1, fields[static_cast<size_t>(target)].numel()) : 1;
  EpochTally tally(epoch, *r.schedule, global_step - start->first_batch, cb, r.planning.empty(), observer, tokens,
                   rows);
  tally.loss_sum = start->loss_sum;
  tally.correct = start->correct;
  tally.samples = tally.host_samples = start->samples;
  if (start->first_batch > 0) metrics.resume_at(start->first_batch, start->accumulator);
  // Once per epoch (the device is idle after the last evaluation): the skipped count so far.
  const int64_t skipped_before = r.scaler ? r.scaler->read().skipped_steps : 0;
  if (r.scaler) metrics.set_scaler_state(r.scaler->state());
  EpochTraining out;
  EpochStats& s = out.stats;
  s.epoch = epoch;
  const auto t0 = Clock::now();
  if (start->first_batch > 0) s.lr = r.schedule->lr(global_step - 1);  // the last step before it stopped
  run_steps(r, epoch, global_step, metrics, tally, s.lr, start->first_batch, observer, t0, start->seconds, cb);
  s.seconds = start->seconds + std::chrono::duration<double>(Clock::now() - t0).count();
  s.train_loss = tally.samples ? tally.loss_sum / static_cast<double>(tally.samples) : 0;
  s.train_accuracy = tally.samples ? static_cast<double>(tally.correct) / static_cast<double>(tally.samples) : 0;
  if (!r.planning.empty()) s.train_accuracy = NAN;  // not computed
  s.samples_per_s = s.seconds > 0 ? static_cast<double>(tally.samples_of(tally.samples)) / s.seconds : 0;
  s.tokens_per_s = s.samples_per_s * static_cast<double>(tokens);
  s.loss_scaled = tally.scaled;
  s.loss_scale = tally.scale;
  s.skipped_steps = tally.scaled ? tally.skipped_total - skipped_before : 0;
  if (r.split) s.split = r.split->epoch_shares(s.seconds);
  out.samples = tally.samples_of(tally.samples);
  return out;
}

}  // namespace tandem::train
