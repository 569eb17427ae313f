#include "run_watch.h"

#include <chrono>

#include <fmt/format.h>

#include "tandem/device.h"
#include "tandem/train/stats_json.h"
#include "tandem/profile/profiler.h"
#include "tandem/stream.h"
#include "tandem/thread_pool.h"
#include "train/home/home_choice.h"

namespace tandem::tools {

using nlohmann::json;

namespace {

constexpr int kSchemaVersion = 1;

Device run_device(const train::TrainConfig& cfg) { return DeviceSpec::parse(cfg.device).device; }

AllocatorStats device_stats(Device d) { return runtime_for(d).allocator(d.index).stats(); }

json utilization_json(const metrics::UtilizationSample& u, bool per_core) {
  json j = {{"cpu_busy", u.cpu_busy},         {"process_busy", u.process_busy}, {"loader_busy", u.loader_busy},
            {"loader_cores", u.loader_cores}, {"samples", u.samples}};
  if (per_core) j["per_core"] = u.per_core;
  if (u.device_memory >= 0) j["device_memory_bytes"] = u.device_memory;
  if (u.gpu_busy >= 0) {
    j["gpu_busy"] = u.gpu_busy;
    j["gpu_memory_used_bytes"] = u.gpu_memory_used;
    j["gpu_memory_total_bytes"] = u.gpu_memory_total;
  }
  return j;
}

// The profiler summary's figures that the report and TensorBoard show.
json summary_json(const profile::Summary& s) {
  json stages = json::object();
  for (int i = 0; i < static_cast<int>(profile::Stage::count_); ++i)
    if (s.stage_seconds[i] > 0) stages[profile::stage_name(static_cast<profile::Stage>(i))] = s.stage_seconds[i];
  return {{"steps", s.steps},
          {"step_seconds", s.step_seconds},
          {"input_seconds", s.input_seconds},
          {"h2d_seconds", s.h2d_seconds},
          {"d2h_seconds", s.d2h_seconds},
          {"hidden_share", s.hidden_share},
          {"host_optimizer_seconds", s.host_optimizer_seconds},
          {"compute_seconds", s.compute_seconds},
          {"optimizer_seconds", s.optimizer_seconds},
          {"data_wait_share", s.data_wait_share},
          {"device_idle_share", s.device_idle_share},
          {"overlap_efficiency", s.overlap_efficiency},
          {"limiting_stage", s.limiting_stage},
          {"advice", s.advice},
          {"stage_seconds", stages}};
}

}  // namespace

bool RunWatch::wanted(const train::TrainConfig& cfg) {
  return !cfg.metrics_file.empty() || !cfg.tensorboard.empty() || cfg.show_utilization;
}

RunWatch::RunWatch(const train::TrainConfig& cfg, const std::string& description,
                   const std::string& memory_plan)
    : cfg_(cfg) {
  start_ns_ = profile::now_ns();
  if (!cfg.metrics_file.empty()) jsonl_ = std::make_unique<metrics::JsonLinesWriter>(cfg.metrics_file);
  if (!cfg.tensorboard.empty()) tb_ = std::make_unique<metrics::TensorBoardWriter>(cfg.tensorboard);
  const Device dev = run_device(cfg);
  metrics::UtilizationSampler::Options o;
  o.gpu_index = nvml_device_index(dev);
  o.device_memory = [dev] { return static_cast<double>(device_stats(dev).allocated_bytes); };
  sampler_ = std::make_unique<metrics::UtilizationSampler>(std::move(o));
  if (jsonl_) {
    const double unix_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    json run = {{"type", "run"},
                {"schema", kSchemaVersion},
                {"description", description},
                {"model", cfg.model},
                {"device", cfg.device},
                {"epochs", cfg.epochs},
                {"batch_size", cfg.batch_size},
                {"log_interval", cfg.log_interval},
                {"num_workers", cfg.num_workers},
                {"cores", available_cores()},
                {"nvml", sampler_->has_nvml()},
                {"start_unix_s", unix_s}};
    if (!memory_plan.empty()) run["memory_plan"] = json::parse(memory_plan);
    jsonl_->write(run);
  }
}

RunWatch::~RunWatch() = default;

double RunWatch::seconds_since_start() const { return static_cast<double>(profile::now_ns() - start_ns_) * 1e-9; }

void RunWatch::attach(train::TrainCallbacks& cb) {
  auto begin = cb.on_epoch_begin;
  cb.on_epoch_begin = [this, begin](int epoch, int64_t steps) {
    epoch_begin_ns_ = profile::now_ns();
    sampler_->take_mean();  // the epoch's mean starts here
    if (begin) begin(epoch, steps);
  };
  auto end = cb.on_epoch_end;
  cb.on_epoch_end = [this, end](const train::EpochStats& s) {
    on_epoch_end(s);
    if (end) end(s);
  };
  auto eval = cb.on_eval;
  cb.on_eval = [this, eval](const train::EvalPoint& e) {
    on_eval(e);
    if (eval) eval(e);
  };
  auto window = cb.on_window;
  cb.on_window = [this, window](const train::WindowStats& w) {
    on_window(w);
    if (window) window(w);
  };
}

// --eval-interval: {"type": "eval", "global_step", "epoch", "val_loss", "val_accuracy", "samples"}.
void RunWatch::on_eval(const train::EvalPoint& e) {
  if (jsonl_)
    jsonl_->write(json{{"type", "eval"},
                       {"epoch", e.epoch},
                       {"global_step", e.global_step},
                       {"time_s", seconds_since_start()},
                       {"val_loss", e.loss},
                       {"val_accuracy", e.accuracy},
                       {"samples", e.samples}});
  if (tb_) tb_->add_scalars(e.global_step, {{"val/loss", e.loss}, {"val/accuracy", e.accuracy}});
}

void RunWatch::on_window(const train::WindowStats& w) {
  global_step_ = w.global_step;
  if (!jsonl_ && !tb_) return;
  const metrics::UtilizationSample u = sampler_->latest();
  if (jsonl_) {
    json rec = {{"type", "window"},
                {"epoch", w.epoch},
                {"step", w.step},
                {"global_step", w.global_step},
                {"time_s", seconds_since_start()},
                {"loss", w.loss},
                {"accuracy", w.accuracy},
                {"lr", w.lr},
                {"samples", w.samples},
                {"images_per_s", w.samples_per_s},
                {"data_wait_share", w.data_wait_share}};
    if (w.tokens_per_s > 0) rec["tokens_per_s"] = w.tokens_per_s;  // token data only
    if (u.samples > 0) rec["utilization"] = utilization_json(u, false);  // none before the first sample
    jsonl_->write(rec);
  }
  if (tb_) {
    std::vector<std::pair<std::string, double>> v = {{"train/loss", w.loss},
                                                     {"train/accuracy", w.accuracy},
                                                     {"train/lr", w.lr},
                                                     {"train/images_per_s", w.samples_per_s},
                                                     {"train/data_wait_share", w.data_wait_share}};
    if (u.samples > 0) {
      v.emplace_back("utilization/cpu_busy", u.cpu_busy);
      v.emplace_back("utilization/loader_busy", u.loader_busy);
      if (u.device_memory >= 0) v.emplace_back("utilization/device_memory_mib", u.device_memory / 1048576.0);
      if (u.gpu_busy >= 0) v.emplace_back("utilization/gpu_busy", u.gpu_busy);
    }
    tb_->add_scalars(w.global_step, v);
  }
}

void RunWatch::on_epoch_end(const train::EpochStats& s) {
  epoch_util_ = sampler_->take_mean();
  if (!jsonl_ && !tb_) return;
  const Device dev = run_device(cfg_);
  const AllocatorStats ds = device_stats(dev);
  json rec = train::epoch_stats_json(s);
  rec.update({{"type", "epoch"},
              {"epochs", cfg_.epochs},
              {"global_step", global_step_},
              {"time_s", seconds_since_start()},
              {"wall_seconds", static_cast<double>(profile::now_ns() - epoch_begin_ns_) * 1e-9},
              {"device_peak_allocated_bytes", ds.peak_allocated_bytes},
              {"device_peak_reserved_bytes", ds.peak_reserved_bytes},
              {"skipped_train", s.skipped_train.size()},
              {"skipped_test", s.skipped_test.size()},
              {"utilization", utilization_json(epoch_util_, true)}});
  // With --trace: the summary of this epoch's spans (stage times, shares, advice).
  profile::Profiler& prof = profile::Profiler::global();
  profile::Summary sum;
  const bool traced = prof.enabled();
  if (traced) {
    std::vector<profile::Profiler::Span> spans = prof.spans();
    std::erase_if(spans, [this](const profile::Profiler::Span& sp) { return sp.begin_ns < epoch_begin_ns_; });
    profile::SummaryOptions o;
    o.num_workers = std::max(0, cfg_.num_workers);
    o.cores = available_cores();
    o.batch_size = cfg_.batch_size;
    o.params_streamed = train::choose_home(cfg_, 1).kind == train::HomeKind::streamed;
    sum = profile::summarize(spans, prof.tracks(), o);
    rec["profile"] = summary_json(sum);
  }
  if (jsonl_) jsonl_->write(rec);
  if (tb_) {
    std::vector<std::pair<std::string, double>> v = {
        {"epoch/train_loss", s.train_loss}, {"epoch/train_accuracy", s.train_accuracy},
        {"epoch/test_loss", s.test_loss},   {"epoch/test_accuracy", s.test_accuracy},
        {"epoch/images_per_s", s.samples_per_s}, {"epoch/seconds", s.seconds},
        {"epoch/cpu_busy", epoch_util_.cpu_busy}, {"epoch/loader_busy", epoch_util_.loader_busy}};
    if (traced) {
      for (int i = 0; i < static_cast<int>(profile::Stage::count_); ++i)
        if (sum.stage_seconds[i] > 0)
          v.emplace_back(fmt::format("stage/{}_s", profile::stage_name(static_cast<profile::Stage>(i))),
                         sum.stage_seconds[i]);
      v.emplace_back("stage/data_wait_share", sum.data_wait_share);
    }
    tb_->add_scalars(global_step_, v);
  }
}

std::string RunWatch::epoch_suffix() const {
  return cfg_.show_utilization ? "  " + metrics::format_utilization(epoch_util_) : "";
}

void RunWatch::finish(const train::TrainResult& r, const profile::Summary* summary) {
  if (!jsonl_) return;
  json rec = {{"type", "summary"},
              {"best_test_accuracy", r.best_test_accuracy},
              {"best_epoch", r.best_epoch},
              {"wall_seconds", r.wall_seconds},
              {"images_per_s", r.samples_per_s},
              {"num_workers", r.num_workers},
              {"prefetch_factor", r.prefetch_factor},
              {"prefetch_depth", r.prefetch_depth},
              {"autotune", r.autotune}};
  if (r.tokens_per_s > 0) rec["tokens_per_s"] = r.tokens_per_s;  // token data only
  if (summary) rec["profile"] = summary_json(*summary);
  jsonl_->write(rec);
}

}  // namespace tandem::tools
