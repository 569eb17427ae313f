// The streamed home (--param-device cpu): a ParamStreamer keeps the parameters in pinned host
// memory, where the host optimizer updates them (each block once its gradients are home;
// clipping and loss scaling check them afterwards and roll back what they must), and uploads the
// blocks around their compute. Under mpirun every rank keeps whole homes and the host gradients
// are all-reduced before each part's update; --zero 3: the host state is sharded over the ranks.
#include <algorithm>

#include <fmt/format.h>

#include "tandem/storage/disk_store.h"
#include "train/dist/dist_setup.h"
#include "train/home/homes.h"
#include "train/place/param_stream.h"
#include "train/run_builder.h"

namespace tandem::train {

namespace {

class StreamedHome final : public ParamHome {
 public:
  StreamedHome(std::unique_ptr<optim::Optimizer> optimizer, std::shared_ptr<ParamStreamer> stream,
               comm::CommunicatorPtr comm, HeldChecks held, std::shared_ptr<CommFigures> figures)
      : ParamHome(std::move(optimizer)),
        ps_(std::move(stream)),
        comm_(std::move(comm)),
        held_(std::move(held)),
        figures_(std::move(figures)) {}

  // Streamed parameters' gradients are zeroed in their device slots and downloaded whole;
  // their homes may still be read by a delayed host update (--offload-delay 1).
  void begin_step(double lr) override {
    optimizer_->set_lr(lr);
    weights_wanted_ = false;
  }
  // --grad-accum-steps: the streamer sums the micro-batches' gradients on the device, sends the
  // running sums home and back, and scales them by 1 / count before the last download.
  void begin_micro_batch(int64_t k, int64_t count) override {
    ParamHome::begin_micro_batch(k, count);
    ps_->set_micro_batch(k, count);
  }
  void average_micro_batches() override {}
  // --zero 3 with checks (held updates): once every shard's gradients are in, the verdict of
  // the loss scaler over every rank's shards (a skipped step ends here, on every rank), the
  // norm over them, and the shards' update.
  void update() override {
    if (ps_->updates_in_backward()) {
      ps_->finish_updates();  // each part was updated once its gradients were home
      return;
    }
    ps_->finish_reductions();
    skipped_ = held_.scaler != nullptr && ps_->check_shards(held_.scaler->host_scale());
    if (skipped_) return;  // the optimizer's step count stays: the schedule's clock does not move
    if (held_.clip > 0) ps_->clip_shards(held_.clip, held_.order, norm_);
    optimizer_->step();
  }
  Device grad_device(Device) const override { return Device{}; }
  bool updates_in_backward() const override { return ps_->updates_in_backward(); }
  bool checks_updates() const override { return ps_->checked() || ps_->holds_updates(); }
  bool step_skipped() const override { return ps_->holds_updates() ? skipped_ : ps_->last_step_skipped(); }

  // The disk tier: the master values come into host memory whole only where they are read or
  // written whole: a checkpoint, saving after training (gather_weights, then flush) and
  // restoring (gather_weights before the first step); each part goes back at its next update.
  // The update thread's collectives (a delayed update's all-reduces or reduce-scatters) end
  // before the training thread issues one of its own on the same communicator.
  void wait_host_updates() override { ps_->wait_updates(); }
  void flush() override {
    ps_->flush();  // the streamed parameters' host update
    if (weights_wanted_) ps_->disk_all_in();
  }
  void gather_weights() override {
    ps_->gather_weights();
    weights_wanted_ = true;
    if (optimizer_->step_count() == 0) ps_->disk_all_in();
  }
  bool weights_sharded() const override { return ps_->sharded(); }
  // --zero 3: every pass all-gathers, so a rank with fewer test batches runs passes without
  // compute until it issued as many collectives as the rank with the most.
  EvalResult evaluate(int64_t batches, const std::function<EvalResult()>& eval) override {
    if (!ps_->sharded() || !comm_) return eval();
    const int64_t most = max_over_ranks(*comm_, batches);
    const EvalResult mine = eval();
    for (int64_t b = batches; b < most; ++b) ps_->idle_pass();
    return mine;
  }

  // --zero 3: the weights and the optimizer's state gathered from every rank's shards.
  void gather_for_checkpoint(const Stream&) override {
    gathered_.clear();
    if (!ps_->sharded()) return;
    ps_->gather_weights();
    gathered_ = ps_->gathered_state(*optimizer_);
  }
  // The host updates queued so far run first (the homes and the optimizer's state final); with
  // a deferred update (--offload-delay 1) the weights the next step computes with are saved
  // beside the homes ("stream.<name>"), so the resumed run computes with them too.
  HomeCheckpoint checkpoint_state() override {
    ps_->wait_updates();
    ps_->disk_all_in();
    HomeCheckpoint out;
    out.pending = ps_->pending_weights();
    out.gathered = ps_->sharded();
    out.optimizer_state = ps_->sharded() ? gathered_ : optimizer_->state();
    return out;
  }
  // Sharded checkpoints under --zero 3: this rank's pieces ("<parameter>[a:b]") of the f32
  // master values and of the optimizer's state.
  ShardState shard_state() override {
    if (!ps_->sharded()) return ParamHome::shard_state();
    ps_->wait_updates();
    TD_CHECK(ps_->pending_weights().empty(), ErrorCode::not_available, "checkpoint",
             "a sharded checkpoint with a pending delayed update: expected --offload-delay 0");
    ShardState out;
    out.params_sharded = true;
    // "<parameter>[a:b]" -> the parameter and a.
    const auto cut = [](const std::string& piece, std::string& param) {
      const size_t open = piece.rfind('['), colon = piece.rfind(':');
      TD_CHECK(open != std::string::npos && colon > open, ErrorCode::internal, "checkpoint", "piece name '{}'", piece);
      param = piece.substr(0, open);
      return std::stoll(piece.substr(open + 1, colon - open - 1));
    };
    std::string param;
    for (const nn::Parameter* p : ps_->shards()->all_pieces()) {
      const int64_t a = cut(p->name, param);
      out.owned.push_back({"model." + param, a, p->value.view({p->value.numel()})});
    }
    for (const nn::NamedTensor& t : optimizer_->state()) {
      const size_t dot = t.name.rfind('.');
      const std::string slot = t.name.substr(dot + 1);
      const int64_t a = cut(t.name.substr(0, dot), param);
      out.owned.push_back({"optim." + param + "." + slot, slot == "step" ? 0 : a, t.tensor.view({t.tensor.numel()})});
    }
    return out;
  }
  // Sharded: the shards are cut anew from the restored whole weights (gather_weights() ran
  // before the model's restore). Then the upload copies from the restored homes.
  void restore(const std::vector<nn::NamedTensor>& state, int64_t step_count,
               const std::vector<nn::NamedTensor>& pending) override {
    if (ps_->sharded()) {
      try {
        ps_->load_sharded(*optimizer_, state, step_count);
      } catch (const Error& e) {
        throw Error(ErrorCode::invalid_argument, does_not_fit(e, state));
      }
    } else {
      ParamHome::restore(state, step_count, {});
    }
    try {
      ps_->reload_homes(pending);
    } catch (const Error& e) {
      throw Error(e.code(), e.what());
    }
    ps_->disk_reloaded();  // the disk tier: the compute copies of the restored master values
  }

  std::string describe(const Run& r) const override;
  std::string describe_end(const Run&) const override {
    return ps_->disk_store() ? describe_disk_end(*ps_->disk_store(), "the host update") : "";
  }
  std::string describe_dist(const Run& r) const override {
    return std::string(ps_->sharded() ? "each part's gradients reduce-scattered (averaged) into the ranks' shards as "
                                        "the backward passes it"
                                      : "each part's host gradients all-reduced (averaged) over the ranks on the host "
                                        "update thread before its update, as the backward passes it; every rank keeps "
                                        "whole host homes") +
           (r.cfg.grad_compression != "none" ? fmt::format(", sent as {}", r.cfg.grad_compression) : "");
  }
  std::string dist_backend(const Run& r) const override { return r.comm->backend(); }
  const char* host_update_flag() const override {
    return ps_->updates_in_backward() ? "--param-device cpu" : nullptr;
  }
  HomeComm comm_figures(const Run&) const override {
    HomeComm c;
    if (figures_) {  // data parallel over whole homes: the update thread's all-reduces
      c.figures = *figures_;
      c.kind = "host gradient all-reduce";
    }
    if (!ps_->sharded()) return c;
    const ParamStreamer::ShardComm z = ps_->shard_comm();
    c.figures.steps = z.steps;
    c.figures.seconds = z.seconds;
    c.figures.bytes = z.bytes;
    c.kind = "ZeRO-3 all-gathers and reduce-scatters";
    // The training thread waited for the gathers; the rest ran beside the device's work.
    if (z.seconds > 0) c.hidden_share = std::max(0.0, 1.0 - z.wait_seconds / z.seconds);
    return c;
  }

 private:
  std::shared_ptr<ParamStreamer> ps_;
  comm::CommunicatorPtr comm_;  // the ranks under mpirun (null in one process)
  HeldChecks held_;             // --zero 3's checks after the held updates
  bool skipped_ = false;        // the last update() found an inf/NaN (held updates)
  Tensor norm_ = Tensor::empty({1});  // clip_shards' global norm ([1] f32, host)
  std::shared_ptr<CommFigures> figures_;  // data parallel over whole homes: the host all-reduces
  bool weights_wanted_ = false;  // gather_weights() since the last step: flush() brings the disk tier in
};

// Where the parameters are, how the blocks move and who updates what.
std::string StreamedHome::describe(const Run& r) const {
  const ParamStreamer& ps = *ps_;
  const std::string& outer = ps.outer_label();
  const bool outer_on_device = ps.device_parts() > 0;  // --optimizer-split takes the outer part first
  const int64_t ahead = ParamStreamer::ahead_for(ps.slots(), ps.prefetch_depth());
  const double slot_mib = static_cast<double>(r.planned ? r.memory_plan.slot_bytes : ps.slot_device_bytes()) / 1048576.0;
  std::string out = fmt::format(
      "\nparameters: at home in pinned host memory (--param-device cpu), updated by the host optimizer; the device "
      "holds {} and {} block slot{} of {:.1f} MiB, blocks uploaded {} ahead of their compute{}",
      outer_on_device ? fmt::format("the layers outside the blocks ({}) for good (below)", outer)
                      : fmt::format("the layers outside the blocks ({}, {:.1f} MiB) during a step", outer,
                                    static_cast<double>(ps.outer_device_bytes()) / 1048576.0),
      ps.slots(), ps.slots() == 1 ? "" : "s", slot_mib, ahead,
      ps.delay() == 1 ? "; each block updated on the host during the next step (--offload-delay 1: a step computes "
                        "with the weights before the last update)"
      : ps.updates_in_backward()
          ? "; each block updated on the host once its gradients are home, beside the backward of the blocks before it"
          : " (updated after the backward)");
  if (ps.checked())
    out += "\nclipping and loss scaling: checked on the host after the step's updates, which ran speculatively and "
           "are rolled back (and, when clipping bites, redone from the clipped gradients) when the checks say so";
  if (ps.holds_updates())
    out += fmt::format(
        "\n{} (--zero 3): checked once every part's gradients are reduce-scattered into the ranks' shards, before "
        "the shards' update{}{}",
        held_.scaler && held_.clip > 0 ? "loss scaling and clipping" : held_.scaler ? "loss scaling" : "clipping",
        held_.scaler ? "; the inf/NaN flags of the ranks' shards summed over the ranks, a step with one skipped on "
                       "every rank"
                     : "",
        held_.clip > 0 ? "; the global norm from every rank's sums of squares" : "");
  if (const storage::DiskStore* disk = ps.disk_store())
    out += "\nthe disk tier (--optimizer-state-device disk): the master values of the parameters uploaded as "
           "compute copies and the optimizer's state on disk, each part read ahead of its host update and written "
           "back behind it; the compute copies and the f32-uploaded values stay in pinned host memory: " +
           describe_disk(r, disk->describe(), disk->disk_bytes());
  int64_t total = 0;
  for (const nn::Parameter* q : r.params) total += q->value.numel();
  if (const ShardedHomes* sh = ps.shards())
    out += fmt::format(
        "\nZeRO-3 (--zero 3): this rank holds 1/{} of the streamed parameters' master values, compute copies, "
        "gradients and optimizer state ({} of {} elements, {:.1f} MiB before the optimizer's state); each part "
        "is all-gathered into a pinned stage of its device buffer before its upload ({:.1f} MiB of stages)",
        sh->world_size(), sh->shard_elements(), total, static_cast<double>(sh->host_bytes()) / 1048576.0,
        static_cast<double>(ps.stage_bytes()) / 1048576.0);
  if (r.cfg.grad_accum_steps > 1)
    out += fmt::format(
        "\ngradient accumulation (--grad-accum-steps {}): each part's running gradient sum goes home after every "
        "micro-batch and back before the next one's backward{}; the update runs once per step, from the last "
        "micro-batch's backward",
        r.cfg.grad_accum_steps,
        ps.sharded() ? " (a whole f32 accumulation home per rank, beside the shards)" : "");
  if (ps.device_parts() > 0)
    out += fmt::format(
        "\noptimizer split (--optimizer-split {}): {} part{} ({:.1f}% of the parameters, {:.1f} MiB with their "
        "gradients) at home on the device and updated there at the step's end",
        r.cfg.optimizer_split, ps.device_parts(), ps.device_parts() == 1 ? "" : "s",
        100.0 * static_cast<double>(ps.device_part_elements()) / static_cast<double>(std::max<int64_t>(1, total)),
        static_cast<double>(ps.device_part_bytes()) / 1048576.0);
  return out;
}

}  // namespace

ParamHomePtr make_streamed_home(std::unique_ptr<optim::Optimizer> optimizer, std::shared_ptr<ParamStreamer> stream,
                                comm::CommunicatorPtr comm, HeldChecks held, std::shared_ptr<CommFigures> figures) {
  return std::make_unique<StreamedHome>(std::move(optimizer), std::move(stream), std::move(comm), std::move(held),
                                        std::move(figures));
}

}  // namespace tandem::train
