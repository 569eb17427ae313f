// The start of a distributed run and its evaluation: the check that every rank runs the same
// flags and model, rank 0's weights on every rank, and evaluation figures summed over ranks.
// Thread-safety: the training thread; every rank calls the same functions in the same order.
#pragma once

#include <string>

#include "tandem/comm/communicator.h"
#include "tandem/device.h"
#include "tandem/nn/module.h"
#include "tandem/train/config.h"
#include "tandem/train/trainer.h"

namespace tandem::train {

/// Compares every flag (checkpoint::flags_json; of --device only the kind, since ranks may
/// use different devices) and the model's parameter names and shapes
/// with rank 0's. A difference on any rank makes EVERY rank throw Error(distributed): the rank
/// that differs names the first differing flag and both values, the others name that rank.
void check_same_run(comm::Communicator& comm, const TrainConfig& cfg, nn::Module& model);
/// Collective: every rank's `fingerprint` of a file it reads itself (train::init_file_source's)
/// against rank 0's. A difference makes every rank throw Error(distributed) naming `what` (e.g.
/// "--init FILE") and the ranks whose copy differs.
void check_same_file(comm::Communicator& comm, uint64_t fingerprint, const std::string& what);

/// Copies rank 0's parameters and buffers into every rank's model (broadcast on the device's
/// default stream; waits for it). `comm` must take `device`'s tensors.
void broadcast_model(comm::Communicator& comm, nn::Module& model, Device device);

/// Sums the ranks' evaluation figures (each rank evaluated its own shard of the test set) so
/// every rank returns the figures of the whole set.
EvalResult sum_over_ranks(comm::Communicator& comm, const EvalResult& local);

/// The largest of the ranks' `mine` (a collective, host buffers): e.g. the most test batches
/// any rank evaluates.
int64_t max_over_ranks(comm::Communicator& comm, int64_t mine);

/// After --resume: every rank must have loaded the same checkpoint (one folder all ranks see).
/// Gathers the global steps the ranks resumed at; a difference makes EVERY rank throw
/// Error(distributed) naming the ranks' steps and `path`.
void check_same_resume(comm::Communicator& comm, int64_t global_step, const std::string& path);

/// --bind: the process-wide CPU binding (tandem/cpu_binding.h) of this rank's share of the
/// machine, from the launcher's local rank and local world size (comm::launch_info()); "auto"
/// binds to cores when several ranks run on this machine and unbinds otherwise. Call before
/// the threads to bind start. Throws Error(invalid_argument) for another mode.
void bind_host_threads(const std::string& bind);

/// "rank 1 of 3" or "" for a run of one process.
std::string rank_note(const comm::Communicator* comm);

}  // namespace tandem::train
