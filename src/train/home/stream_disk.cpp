// The disk tier's words shared by the homes that have one (host master: the offloaded
// optimizer's buckets; streamed: the streamer's parts), and the streamed home's disk tier
// (ParamStreamer::set_disk_tier) built from the run's flags.
#include <fmt/format.h>

#include "tandem/storage/disk_store.h"
#include "train/home/homes.h"
#include "train/place/param_stream.h"
#include "train/run_builder.h"

namespace tandem::train {

void stream_state_to_disk(ParamStreamer& stream, const TrainConfig& cfg) {
  storage::check_offload_dir(cfg.offload_dir, 0);  // the plan checked the space; the files take it up front
  storage::DiskStoreOptions so;
  so.dir = cfg.offload_dir;
  std::tie(so.model_read_gbps, so.model_write_gbps) = parse_disk_gbps(cfg.disk_gbps);
  stream.set_disk_tier(so);
}

// The disk's term of the step-time bound: every optimizer step reads and writes the files
// once; with --disk-gbps its modelled time.
std::string describe_disk(const Run& r, const std::string& store, uint64_t bytes) {
  const auto [rd, wr] = parse_disk_gbps(r.cfg.disk_gbps);
  const double b = static_cast<double>(bytes);
  std::string out = store + fmt::format("; per optimizer step {:.1f} MB read and written", b / 1e6);
  if (rd > 0)
    out += fmt::format(", {:.1f} ms at the modelled drive (the disk's term of the step bound)",
                       1e3 * (b / (rd * 1e9) + b / (wr * 1e9)));
  return out;
}

std::string describe_disk_end(const storage::DiskStore& disk, const char* who) {
  const storage::DiskFigures f = disk.figures();
  const double gib = 1 << 30;
  std::string out = fmt::format(
      "disk: read {:.2f} GiB at {:.2f} GB/s, wrote {:.2f} GiB at {:.2f} GB/s (while busy); {} waited {:.2f} s for "
      "it, {:.0f}% of its busy time hidden",
      static_cast<double>(f.bytes_read) / gib, f.read_gbps(), static_cast<double>(f.bytes_written) / gib,
      f.write_gbps(), who, f.wait_seconds, 100 * f.hidden_share());
  // The advice: the disk binds when the update thread spent a quarter of the run waiting for it.
  if (f.lifetime_seconds > 0 && f.wait_seconds > 0.25 * f.lifetime_seconds)
    out += fmt::format("\nadvice: disk-bound: the update thread waited for the disk {:.0f}% of the run; every "
                       "optimizer step reads and writes the whole state once, so more tokens per step "
                       "(--batch-size, --grad-accum-steps), --optimizer-moments bf16 (a third fewer bytes) or a "
                       "faster --offload-dir spread it",
                       100 * f.wait_seconds / f.lifetime_seconds);
  return out;
}

}  // namespace tandem::train
