#include "train/evaluate.h"

#include <cmath>
#include <deque>

#include "tandem/error.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/profile/profiler.h"
#include "tandem/data/image_fields.h"
#include "tandem/data/open_dataset.h"
#include "tandem/nn/models.h"
#include "tandem/safetensors.h"
#include "train/metrics_readback.h"
#include "train/run_builder.h"
#include "train/weights.h"

namespace tandem::train {

// Sums the read-back windows into the result; labels outside the classes are an error.
static EvalResult sum_windows(const std::deque<MetricsReadback::Window>& done) {
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

EvalResult run_eval(nn::Module& model, BatchFeed& feed, Device device, int64_t interval) {
  profile::ScopedSpan span(profile::Stage::eval, "evaluate");
  model.eval();
  nn::CrossEntropyLoss loss_fn;
  feed.begin_epoch(0);
  MetricsReadback metrics(device, feed.compute_stream(), interval);
  std::deque<MetricsReadback::Window> done;
  int64_t batches = 0, samples = 0;
  while (const data::FieldBatch* batch = feed.next()) {
    const Tensor& input = batch->get(data::FieldRole::input);    // images, tokens
    const Tensor& target = batch->get(data::FieldRole::target);  // labels, next tokens
    if (model.fuses_loss()) {  // a language model's fused loss (eval mode: no gradients)
      model.loss_forward(input, target, metrics.accumulator());
    } else {
      Tensor logits = model.forward(input);
      loss_fn.forward_accumulate(logits, target, metrics.accumulator());
    }
    metrics.step_done(++batches, done);
    samples += batch->samples();
  }
  metrics.finish(batches, done);
  feed.release();
  if (!planning_note(device).empty()) {  // the windows hold whatever the device memory held
    EvalResult r;
    r.loss = r.accuracy = NAN;
    r.samples = samples;
    return r;
  }
  return sum_windows(done);
}

EvalResult evaluate_weights(const TrainConfig& cfg) {
  validate(cfg, "eval");
  const Device device = resolve_device(cfg.device, "eval");
  set_threads(cfg.threads);
  try {
    nn::check_model_name(cfg.model);
  } catch (const Error& e) {
    rethrow_naming_flag(e, "eval", "--model", cfg.model);
  }
  std::map<std::string, std::string> metadata;
  const NamedTensors weights = load_safetensors(cfg.weights, &metadata);
  check_saved_model(metadata, cfg.weights, cfg.model);
  const std::shared_ptr<const data::Dataset> test_set = open_split(cfg, data::Split::test);
  const Transforms transforms = make_transforms(*test_set, dataset_options(cfg).format, cfg);
  const nn::ModelSpec spec = model_spec(*test_set, *transforms.eval);
  check_saved_spec(metadata, cfg.weights, spec, cfg.data_dir);
  nn::ModulePtr model = nn::make_model(cfg.model, spec, cfg.seed);
  load_state(*model, weights, cfg.weights);
  if (!device.is_host()) model->to(device);
  auto feed = make_test_feed(std::make_shared<data::ImageFields>(test_set, transforms.eval), pipeline_start(cfg),
                             device, "eval", "test batches: lower --batch-size");
  struct Drain {  // also when run_eval throws
    Device device;
    ~Drain() { drain_device(device); }
  } drain{device};
  return run_eval(*model, *feed, device, cfg.log_interval);
}

}  // namespace tandem::train
