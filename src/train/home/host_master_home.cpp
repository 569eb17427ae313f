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
           (l.disk.empty() ? "" : "; master weights and moments on disk: " + l.disk + disk_term(r, l.disk_bytes));
  }

  // The disk's term of the step-time bound: every optimizer step reads and writes the files
  // once; with --disk-gbps its modelled time.
  static std::string disk_term(const Run& r, uint64_t bytes) {
    const auto [rd, wr] = parse_disk_gbps(r.cfg.disk_gbps);
    const double b = static_cast<double>(bytes);
    std::string out = fmt::format("; per optimizer step {:.1f} MB read and written", b / 1e6);
    if (rd > 0) out += fmt::format(", {:.1f} ms at the modelled drive (the disk's term of the step bound)",
                                   1e3 * (b / (rd * 1e9) + b / (wr * 1e9)));
    return out;
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
    const storage::DiskFigures f = disk->figures();
    const double gib = 1 << 30;
    std::string out = fmt::format(
        "disk: read {:.2f} GiB at {:.2f} GB/s, wrote {:.2f} GiB at {:.2f} GB/s (while busy); the update thread "
        "waited {:.2f} s for it, {:.0f}% of its busy time hidden",
        static_cast<double>(f.bytes_read) / gib, f.read_gbps(), static_cast<double>(f.bytes_written) / gib,
        f.write_gbps(), f.wait_seconds, 100 * f.hidden_share());
    // The advice: the disk binds when the update thread spent a quarter of the run waiting for it.
    if (f.lifetime_seconds > 0 && f.wait_seconds > 0.25 * f.lifetime_seconds)
      out += fmt::format("\nadvice: disk-bound: the update thread waited for the disk {:.0f}% of the run; every "
                         "optimizer step reads and writes the whole state once, so more tokens per step "
                         "(--batch-size, --grad-accum-steps), --optimizer-moments bf16 (a third fewer bytes) or a "
                         "faster --offload-dir spread it",
                         100 * f.wait_seconds / f.lifetime_seconds);
    return out;
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
