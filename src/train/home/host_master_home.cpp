// The host-master home (--optimizer-device cpu): an OffloadOptimizer keeps the f32 master
// weights and the moments in host memory; gradient buckets come down during backward, its
// update thread updates them and uploads the parameters (tandem/optim/offload.h). Data
// parallel: each bucket's host gradients are averaged over the ranks before its update
// (ZeRO-1: reduce-scattered into this rank's blocks, the updated ones all-gathered).
#include <fmt/format.h>

#include "tandem/optim/kernels.h"
#include "tandem/optim/offload.h"
#include "tandem/storage/disk_store.h"
#include "train/home/homes.h"
#include "train/run_builder.h"

namespace tandem::train {

namespace {

class HostMasterHome final : public ParamHome {
 public:
  // `offload`: the OffloadOptimizer `optimizer` is.
  HostMasterHome(std::unique_ptr<optim::Optimizer> optimizer, optim::OffloadOptimizer& offload,
                 std::shared_ptr<CommFigures> comm, bool checks)
      : ParamHome(std::move(optimizer)), offload_(offload), comm_(std::move(comm)), checks_(checks) {}

  // With the hook attached the buckets launch during the last micro-batch's backward only,
  // each scaled by 1 / count on the device before it comes down (the resident home's op);
  // without it (a split) they launch at update(), after the base averaged them.
  void begin_micro_batch(int64_t k, int64_t count) override {
    ParamHome::begin_micro_batch(k, count);
    if (offload_.attached()) offload_.set_micro_batch(k, count);
  }
  void average_micro_batches() override {
    if (!offload_.attached()) ParamHome::average_micro_batches();
  }

  bool checks_updates() const override { return checks_; }
  bool step_skipped() const override { return offload_.last_step_skipped(); }

  void flush() override { offload_.flush(); }
  void wait_host_updates() override { offload_.finish_host_updates(); }
  // The update thread may still run this step's update: wait for it so that the host state is
  // final. A pending delayed upload (delay 1) stays pending: the model's parameters are saved
  // as the device holds them (one update behind) and the optimizer's state adds the master
  // copy, so the resumed run uploads it where this one will. With low-precision transfers the
  // device's f32 values are written from the master copy first.
  HomeCheckpoint checkpoint_state() override {
    offload_.finish_host_updates();
    offload_.write_master_values();
    return ParamHome::checkpoint_state();
  }
  bool upload_pending() const override { return offload_.upload_pending(); }
  // ZeRO-1: this rank's blocks of every bucket; else the whole state, alike on every rank.
  ShardState shard_state() override {
    offload_.finish_host_updates();
    if (!offload_.layout().sharded) return ParamHome::shard_state();
    ShardState out;
    for (optim::OffloadOptimizer::StateSlice& s : offload_.state_slices())
      out.owned.push_back({"optim." + s.name, s.begin, s.tensor});
    return out;
  }

  std::string describe_optimizer(const Run& r) const override {
    const optim::OffloadLayout l = offload_.layout();
    const std::string delay = l.delay == 1 && r.cfg.offload_delay_warmup > 0
                                  ? fmt::format("delay 1 after {} steps", r.cfg.offload_delay_warmup)
                                  : fmt::format("delay {}", l.delay);
    const optim::OffloadTransfer t = l.per_step;
    return fmt::format(" on the cpu (offloaded, {} bucket{}, --bucket-cap-mb {}, {}, {} SIMD; per step {:.3f} MiB "
                       "of {} gradients down, {:.3f} MiB of parameters up)",
                       l.buckets, l.buckets == 1 ? "" : "s", r.cfg.bucket_cap_mb, delay,
                       optim::simd_level_name(), static_cast<double>(t.to_host) / (1 << 20),
                       dtype_name(l.transfer_dtype), static_cast<double>(t.to_device) / (1 << 20)) +
           (l.disk.empty() ? "" : "; master weights and moments on disk: " + describe_disk(r, l.disk, l.disk_bytes));
  }

  std::string describe_dist(const Run& r) const override {
    std::string out = ParamHome::describe_dist(r);
    if (r.cfg.zero == 1)
      out += fmt::format("\nZeRO-1 with the offloaded optimizer: this rank updates 1/{} of every bucket and keeps "
                         "its optimizer state; {:.2f} MiB of host memory on this rank (master copy and gradients "
                         "whole, moments 1/{})",
                         r.comm->world_size(), static_cast<double>(offload_.host_bytes()) / (1 << 20),
                         r.comm->world_size());
    return out;
  }

  const char* host_update_flag() const override { return "--optimizer-device"; }

  std::string describe_end(const Run& r) const override {
    const storage::DiskStore* disk = offload_.disk_store();
    if (!disk) return "";
    return describe_disk_end(*disk, "the update thread");
  }

  HomeComm comm_figures(const Run& r) const override {
    HomeComm c;
    if (comm_) c.figures = *comm_;
    return c;
  }

 private:
  optim::OffloadOptimizer& offload_;  // optimizer_
  std::shared_ptr<CommFigures> comm_;  // the host all-reduces' figures (null in one process)
  bool checks_;  // the offloaded optimizer checks (and clips) the gradients
};

}  // namespace

ParamHomePtr make_host_master_home(std::unique_ptr<optim::OffloadOptimizer> optimizer,
                                   std::shared_ptr<CommFigures> comm, bool checks) {
  optim::OffloadOptimizer& offload = *optimizer;
  return std::make_unique<HostMasterHome>(std::move(optimizer), offload, std::move(comm), checks);
}

}  // namespace tandem::train
