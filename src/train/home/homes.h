// The parameter homes' constructors (param_home.h says what each one is) and the function that
// picks and builds the one a TrainConfig asks for.
// Thread-safety: called by the thread that builds the run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tandem/comm/communicator.h"
#include "tandem/train/config.h"
#include "train/home/param_home.h"

namespace tandem::optim {
class LossScaler;
class OffloadOptimizer;
}  // namespace tandem::optim
namespace tandem::storage {
class DiskStore;
}  // namespace tandem::storage

namespace tandem::train {

class ParamStreamer;
class ZeroOptimizer;

/// Parameters beside the compute, updated by an optimizer whose updates are ordered on the
/// device's stream (make_optimizer's); `reducer` (null in one process) averages the gradients of
/// a data-parallel run.
ParamHomePtr make_resident_home(std::unique_ptr<optim::Optimizer> optimizer, std::unique_ptr<GradReducer> reducer);
/// The resident home under ZeRO-1: `optimizer` keeps this rank's part of the state, and a
/// checkpoint gathers the whole from every rank (a collective).
ParamHomePtr make_zero1_home(std::unique_ptr<ZeroOptimizer> optimizer, std::unique_ptr<GradReducer> reducer);
/// An OffloadOptimizer's home; `comm` (null in one process) collects its host all-reduces' figures;
/// `checks`: the optimizer checks the gradients (OffloadOptions::loss_scale, clip_grad_norm).
ParamHomePtr make_host_master_home(std::unique_ptr<optim::OffloadOptimizer> optimizer,
                                   std::shared_ptr<CommFigures> comm, bool checks = false);
/// --zero 3's checks of a step whose updates the streamer holds (ParamStreamer::set_hold_updates):
/// the loss scaler whose host_scale() unscales the shards (null: none; it must outlive the home),
/// the max norm of the gradients (0: no clipping) and the model's parameters in its order (the
/// norm's order).
struct HeldChecks {
  const optim::LossScaler* scaler = nullptr;
  double clip = 0;
  std::vector<nn::Parameter*> order;
};
/// Streamed parameters; `optimizer` is built over stream->optimizer_params(); `comm` is the
/// ranks' communicator under mpirun (null in one process); `held`: --zero 3's checks after held
/// updates (the streamer holds them); `figures` (data parallel over whole homes: the stream's
/// set_grad_reduce hook) collects the host all-reduces' figures.
ParamHomePtr make_streamed_home(std::unique_ptr<optim::Optimizer> optimizer, std::shared_ptr<ParamStreamer> stream,
                                comm::CommunicatorPtr comm, HeldChecks held = {},
                                std::shared_ptr<CommFigures> figures = nullptr);

/// The disk tier of a streamed home (--param-device cpu --optimizer-state-device disk;
/// stream_disk.cpp): `stream`'s master values and optimizer state go into files under
/// --offload-dir (ParamStreamer::set_disk_tier). Call after its set_host_update. Throws
/// Error(invalid_argument) for a folder check_offload_dir refuses, the store's errors.
void stream_state_to_disk(ParamStreamer& stream, const TrainConfig& cfg);
/// The line after training of a home with a disk tier (describe_end): bytes, rates, the time
/// `who` waited for the disk and the share hidden, and the advice when the disk binds.
std::string describe_disk_end(const storage::DiskStore& disk, const char* who);
/// The banner's words of a disk tier: its files, engine and window, and the disk's term of the
/// step bound (with --disk-gbps) for `bytes` read and written once per optimizer step.
std::string describe_disk(const Run& r, const std::string& store, uint64_t bytes);

/// Puts the model's parameters where `cfg` homes them, before the run's communicator is set:
/// streamed from the host (--param-device cpu; under several ranks it first checks the run
/// agrees and broadcasts rank 0's weights over `comm`, then makes the homes, --zero 3 cutting
/// the shards), else moved to
/// `r.device`. Returns the streamer (null when not streamed). Throws Error(invalid_argument)
/// naming --param-device for a model or a run it cannot stream.
std::shared_ptr<ParamStreamer> home_parameters(Run& r, const TrainConfig& cfg, const comm::CommunicatorPtr& comm);

/// Whether the run keeps a dynamic loss scaler (--loss-scale dynamic, or auto with fp16).
bool uses_loss_scaler(const TrainConfig& cfg);

/// Builds the run's home: its optimizer (on the device, ZeRO-1, offloaded to the host, or over
/// the streamed parameters) and what runs it (the gradient reducer, the offload hooks, the
/// streamer's host update). `split`: the batch is split over --devices (an offloaded optimizer
/// then launches its buckets at step(), not from backward's hook). Needs r.params, r.model,
/// r.comm and the feeds. Throws Error(invalid_argument) for flags the home refuses, naming them.
ParamHomePtr make_param_home(Run& r, const TrainConfig& cfg, bool split, std::shared_ptr<ParamStreamer> stream);

}  // namespace tandem::train
