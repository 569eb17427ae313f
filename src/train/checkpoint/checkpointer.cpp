#include "train/checkpoint/checkpointer.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "tandem/train/stats_json.h"
#include "tandem/train/stop.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/run_flags.h"
#include "train/checkpoint/run_state.h"
#include "train/checkpoint/shard_capture.h"
#include "train/checkpoint/shard_files.h"

namespace tandem::train::checkpoint {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Checkpointer::Checkpointer(Run& run, const TrainCallbacks& cb) : run_(run), cb_(cb) {
  dist_ = run.comm && run.comm->world_size() > 1;
  if (run.cfg.checkpoint_dir.empty()) return;
  active_ = true;
  sharded_ = sharded_checkpoints(run.cfg);
  const int rank = dist_ ? run.comm->rank() : 0;
  if (!sharded_ && rank != 0) return;  // rank 0 writes
  // Rank 0 prepares the folder before its first step, so before any rank's first shard.
  if (rank == 0) prepare_checkpoint_dir(run.cfg.checkpoint_dir);
  std::optional<ShardSpec> spec;
  if (sharded_) spec = ShardSpec{rank, dist_ ? run.comm->world_size() : 1, run.cfg.dist_timeout};
  writer_ = std::make_unique<Writer>(run.cfg.checkpoint_dir, run.cfg.keep_checkpoints, spec);
  for (auto& s : snapshots_) s = std::make_shared<Snapshot>();
}

Checkpointer::~Checkpointer() = default;  // the writer finishes the job in flight

std::string Checkpointer::name_of(int64_t global_step) const {
  return sharded_ ? sharded_checkpoint_name(global_step) : checkpoint_file_name(global_step);
}

json Checkpointer::base_state(int epoch, int64_t step, int64_t steps_in_epoch, int64_t global_step, double seconds) {
  const Run& r = run_;
  json epochs = json::array();
  double best = 0;
  int best_epoch = 0;
  if (history_) {
    for (const EpochStats& s : history_->epochs) epochs.push_back(epoch_stats_json(s));
    best = history_->best_test_accuracy;
    best_epoch = history_->best_epoch;
  }
  const data::Loader& loader = r.train_feed->loader();
  const bool upload_pending = r.home->upload_pending();
  return {{"epoch", epoch},
          {"step", step},
          {"steps_in_epoch", steps_in_epoch},
          {"global_step", global_step},
          {"world_size", r.comm ? r.comm->world_size() : 1},
          {"data_order",
           {{"seed", r.cfg.seed},
            {"shuffle", r.cfg.shuffle},
            {"batch_size", r.cfg.batch_size},
            {"epoch_index", epoch - 1},
            {"first_batch", step}}},
          {"epoch_seconds", seconds},
          {"epochs", epochs},
          {"best_test_accuracy", best},
          {"best_epoch", best_epoch},
          {"optimizer",
           {{"name", r.optimizer().name()},
            {"step_count", r.optimizer().step_count()},
            {"device", r.cfg.optimizer_device},
            {"upload_pending", upload_pending}}},
          {"pipeline",
           {{"num_workers", loader.num_workers()},
            {"prefetch_factor", loader.prefetch_factor()},
            {"prefetch_depth",
             r.train_feed->prefetcher() ? r.train_feed->prefetcher()->prefetch_depth() : 0},
            {"autotune", r.tuner ? r.tuner->describe() : ""}}},
          {"flags", flags_json(r.cfg)},
          {"run_config", r.cfg.run_config}};
}

void Checkpointer::capture(const StepView* view, int epoch, int64_t step, int64_t global_step, bool stop) {
  const auto t0 = Clock::now();
  last_global_step_ = global_step;
  Run& r = run_;
  // A sharded home gathers what rank 0 writes (every rank takes part). Gathered tensors are
  // fresh memory the snapshot copies asynchronously: the last ones are released only once
  // their copy is done.
  if (gathered_for_) gathered_for_->wait();
  gathered_for_.reset();
  if (!sharded_) r.home->gather_for_checkpoint(r.train_stream());
  if (!writer_) return;
  std::shared_ptr<Snapshot> snap = snapshots_[next_];
  next_ = (next_ + 1) % snapshots_.size();
  if (writer_->uses(snap.get())) writer_->wait_idle();  // not with two buffers and one job, but cheap to be sure
  Pending& p = pending_;
  if (sharded_) {  // each rank its own part of the state, no gathers
    if (r.scaler) r.train_stream().synchronize();
    ShardSources src = shard_sources(r, view ? *view->accumulator : Tensor::zeros({4}));
    snap->capture(src.tensors, r.device, r.train_stream());
    p.pieces = std::move(src.pieces);
  } else {
    // The home's host updates run first, so that its state is final (param_home.h).
    const HomeCheckpoint home = r.home->checkpoint_state();
    // Under a loss scaler the optimizer's step counts advance where the device runs the gated
    // steps: let it finish them, so that the counts and the scaler's state are this step's.
    if (r.scaler) r.train_stream().synchronize();
    NamedTensors sources;
    for (const nn::NamedTensor& t : r.model->state_dict()) sources.emplace_back("model." + t.name, t.tensor);
    for (const nn::NamedTensor& t : home.optimizer_state) sources.emplace_back("optim." + t.name, t.tensor);
    for (const nn::NamedTensor& t : home.pending) sources.emplace_back("stream." + t.name, t.tensor);
    sources.emplace_back("metrics.accumulator", view ? *view->accumulator : Tensor::zeros({4}));
    if (r.scaler) sources.emplace_back("scaler.state", r.scaler->state());
    snap->capture(sources, r.device, r.train_stream());
    if (home.gathered) gathered_for_ = snap;
  }
  const int64_t steps_in_epoch = r.steps_per_epoch();
  p.snapshot = snap;
  p.state = base_state(epoch, step, steps_in_epoch, global_step, view ? view->seconds : 0);
  if (sharded_) p.state["weights"] = weights_record(r);
  p.need_through = view ? view->read_through : 0;
  p.report = CheckpointReport{r.cfg.checkpoint_dir + "/" + name_of(global_step),
                              view || step > 0 ? epoch : epoch - 1,  // an epoch's end: its last step
                              view || step > 0 ? step : steps_in_epoch,
                              steps_in_epoch,
                              global_step,
                              0,
                              stop};
  p.pause_s = since(t0);
  has_pending_ = true;
  if (!view || folded_through_ >= p.need_through) submit();
}

// Hands the pending checkpoint to the writer with the figures through its read-back.
void Checkpointer::submit() {
  const auto t0 = Clock::now();
  Pending& p = pending_;
  const bool mid_epoch = p.need_through > 0 || p.state["step"].get<int64_t>() > 0;
  p.state["tally"] = mid_epoch ? json{{"loss_sum", loss_sum_}, {"correct", correct_}, {"samples", samples_}}
                               : json{{"loss_sum", 0.0}, {"correct", 0}, {"samples", 0}};
  writer_->submit(p.snapshot, std::move(p.state), name_of(p.report.global_step), std::move(p.pieces));
  has_pending_ = false;
  p.snapshot.reset();
  const double pause = p.pause_s + since(t0);
  p.report.pause_ms = pause * 1e3;
  ++count_;
  pause_sum_s_ += pause;
  pause_max_s_ = std::max(pause_max_s_, pause);
  if (cb_.on_checkpoint && (!dist_ || run_.comm->rank() == 0)) cb_.on_checkpoint(p.report);
}

void Checkpointer::window_done(int64_t last_step, double loss_sum, int64_t correct, int64_t samples) {
  folded_through_ = last_step;
  loss_sum_ = loss_sum;
  correct_ = correct;
  samples_ = samples;
  if (has_pending_ && last_step == pending_.need_through) submit();
}

// A stop signal this rank got; in a data-parallel run with checkpoints the largest any rank got,
// agreed every log_interval steps (a one-element all-reduce on the compute stream, read back),
// 0 in between.
int Checkpointer::agreed_stop_signal(const StepView& v) {
  const int mine = StopSignals::requested();
  if (!dist_ || !active_) return mine;
  if (v.step % run_.cfg.log_interval != 0 && v.step != v.steps_in_epoch) return 0;
  const Run& r = run_;
  // The offloaded optimizer's update thread all-reduces on the same communicator: let it
  // finish this step's buckets first, so that every rank issues the collectives in one order.
  r.home->wait_host_updates();
  Runtime& rt = runtime_for(r.device);
  const Stream s = rt.current_stream(r.device.index);
  Tensor host = Tensor::full({1}, static_cast<float>(mine));
  Tensor flag = r.device.is_host() ? host : Tensor::empty({1}, DType::f32, r.device);
  if (!r.device.is_host()) rt.copy_async(flag.raw_data(), r.device, host.raw_data(), Device{}, 4, s);
  r.device_comm->all_reduce(flag, comm::ReduceOp::sum, s);  // signal numbers: any non-zero sum stops
  if (!r.device.is_host()) rt.copy_async(host.raw_data(), Device{}, flag.raw_data(), r.device, 4, s);
  s.synchronize();
  const int sum = static_cast<int>(host.data<float>()[0]);
  return sum == 0 ? 0 : mine != 0 ? mine : sum;
}

void Checkpointer::after_step(const StepView& v) {
  const int sig = agreed_stop_signal(v);
  if (sig != 0) {
    if (active_) {
      v.drain();  // the figures through the last read-back, then the rest is in the accumulator
      if (has_pending_) submit();
      capture(&v, v.epoch, v.step, v.global_step, true);
      if (has_pending_) submit();
      if (writer_) writer_->wait_idle();
    }
    throw StopRequested{sig};
  }
  if (!active_ || run_.cfg.checkpoint_every <= 0 || v.global_step % run_.cfg.checkpoint_every != 0) return;
  if (v.step == v.steps_in_epoch) return;  // the epoch-end one follows
  if (has_pending_) {
    // One still waits for its figures: a whole checkpoint skips this one. A sharded one may
    // not (when the figures arrive differs between ranks, so would which checkpoints each
    // rank writes, and rank 0 would wait for shards that never come): its figures are read
    // back now, and it is handed over first.
    if (!sharded_) return;
    v.drain();
    if (has_pending_) submit();
  }
  capture(&v, v.epoch, v.step, v.global_step, false);
}

void Checkpointer::resume_epoch(const EpochStart& start, int64_t interval) {
  folded_through_ = start.first_batch / interval * interval;
  loss_sum_ = start.loss_sum;
  correct_ = start.correct;
  samples_ = start.samples;
}

void Checkpointer::epoch_end(int epoch, int64_t global_step) {
  // --max-steps may end the run inside an epoch: the checkpoint is then that position (with
  // the epoch's figures so far, all read back by now), not the start of the next epoch.
  const int64_t per_epoch = run_.steps_per_epoch();
  const int64_t in_epoch = global_step - static_cast<int64_t>(epoch - 1) * per_epoch;
  const bool cut = run_.cfg.max_steps > 0 && in_epoch > 0 && in_epoch < per_epoch;
  if (active_ && cut) {
    if (last_global_step_ != global_step) {
      has_pending_ = false;
      capture(nullptr, epoch, in_epoch, global_step, false);
    } else if (has_pending_) {
      submit();  // --checkpoint-every's capture of this very step, now that its figures are in
    }
  }
  folded_through_ = 0;
  loss_sum_ = 0;
  correct_ = samples_ = 0;
  if (!active_ || cut) return;
  if (has_pending_ && sharded_) submit();  // every rank writes every one (after_step); its figures are in
  has_pending_ = false;  // a mid-epoch one still waiting has been overtaken
  capture(nullptr, epoch + 1, 0, global_step, false);
}

void Checkpointer::finish(TrainResult& result) {
  if (writer_) writer_->wait_idle();
  result.checkpoints = count_;
  result.checkpoint_pause_max_ms = pause_max_s_ * 1e3;
  result.checkpoint_pause_mean_ms = count_ ? pause_sum_s_ / count_ * 1e3 : 0;
}

}  // namespace tandem::train::checkpoint
