// GradReducer: PyTorch DDP's gradient buckets for an optimizer beside the parameters. The
// parameters that get gradients are planned into buckets of whole parameters in reverse
// registration order (plan_ddp_buckets: the first bucket closed at 1 MiB, the others at
// bucket_cap_mb), each with a flat f32 buffer on the parameters' device. During backward the
// model's grad-ready hook reports finished parameters; once a bucket's parameters are all in,
// the reducer records an event on the compute stream and, on its own comm stream, copies the
// gradients into the flat buffer, all-reduces it (mean over the ranks) and copies the result
// back, so bucket k travels while backward still computes the earlier layers. finish() (after
// backward, before the optimizer step) launches the buckets not launched yet and makes the
// compute stream wait for the comm stream. Parameters the hook never reported in a step (unused
// by forward) stop counting towards their bucket from the next step on, so they never keep it
// from starting; frozen ones (requires_grad false) are in no bucket. A placed model's
// parameters on other devices than the reducer's (--place) travel through its buffers too:
// the comm stream waits for their devices' compute streams, copies from and back to them, and
// those streams (the host, for the cpu) wait for the reductions in finish().
// Figures (comm_timeline.h): per step, the comm stream's communication time (seconds), the
// part of it before backward ended on the device ("hidden"), and apart from it the time spent
// waiting at a barrier for the slowest rank to reach each bucket (skew); on the cpu streams
// run inline in the training thread, so nothing is hidden there.
// Thread-safety: one training thread; the comm stream's work runs on that stream's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "tandem/comm/communicator.h"
#include "tandem/nn/module.h"
#include "tandem/optim/offload.h"
#include "tandem/stream.h"
#include "train/dist/grad_compression.h"

namespace tandem::train {

struct CommFigures {
  int64_t steps = 0;
  double seconds = 0;         // communication time on the comm stream, all steps (no skew)
  double hidden_seconds = 0;  // the part of it before backward ended
  double skew_seconds = 0;    // waiting for the slowest rank to reach the buckets, all steps
  double bytes = 0;           // bytes each rank sent into the all-reduces, all steps
};

/// PyTorch DDP's bucket assignment: parameters of `numels` elements (registration order) are
/// taken in reverse order and added to the current bucket, which is closed once it holds at
/// least `cap_bytes` of fp32 (the first bucket: `first_cap_bytes`), so a bucket may exceed its
/// cap by its last parameter; the remainder forms the last bucket. Ranges [begin, end) follow
/// one another without gaps. Throws Error(invalid_argument) for a cap of 0.
std::vector<optim::OffloadBucket> plan_ddp_buckets(const std::vector<int64_t>& numels, size_t cap_bytes,
                                                   size_t first_cap_bytes);

class GradReducer {
 public:
  /// Attaches the hook to `model` (unless `hook` is false: then every bucket launches in
  /// finish(), as for a batch split, whose gradients are complete only once combined);
  /// `params` may live on other devices than `device` (the buffers' and comm stream's).
  /// `compressor` (null: none) compresses each bucket on its way (grad_compression.h;
  /// host-addressable buffers only). Throws Error(invalid_argument) for bucket_cap_mb <= 0.
  GradReducer(comm::CommunicatorPtr comm, nn::Module& model, const std::vector<nn::Parameter*>& params,
              Device device, double bucket_cap_mb, std::unique_ptr<GradCompressor> compressor = nullptr,
              bool hook = true);
  ~GradReducer();
  /// After backward: launches the remaining buckets and orders the compute stream after the
  /// reductions (no host wait on virt and cuda).
  void finish();
  /// Gradient accumulation (DDP's no_sync): while `hold`, the hook takes nothing and finish()
  /// does nothing, so an earlier micro-batch's gradients only accumulate on the device; the
  /// last micro-batch's backward (hold false) reduces the sums, bucket by bucket as usual.
  void set_hold(bool hold) { hold_ = hold; }
  const std::vector<optim::OffloadBucket>& buckets() const { return buckets_; }
  /// Figures of the steps so far (waits for the comm stream first).
  CommFigures figures();

 private:
  struct Times;
  void on_ready(const std::vector<nn::Parameter*>& ps);
  void launch(size_t k);

  comm::CommunicatorPtr comm_;
  nn::Module& model_;
  std::vector<nn::Parameter*> params_;
  Device device_;
  std::vector<Device> others_;  // the devices of parameters not on device_ (--place), in order
  Stream comm_stream_;
  std::vector<optim::OffloadBucket> buckets_;
  std::vector<Tensor> flat_;                 // per bucket
  std::vector<int64_t> offset_;              // per parameter, within its bucket's buffer
  std::vector<int> bucket_of_;               // per parameter
  std::vector<char> seen_, used_;            // per parameter: reported this step / last step
  std::vector<int> left_;                    // per bucket: parameters to come
  std::vector<char> launched_;
  std::shared_ptr<Times> times_;
  std::shared_ptr<GradCompressor> compressor_;
  bool first_step_ = true;
  bool hold_ = false;  // set_hold
};

/// The grads hook of an offloaded optimizer in a distributed run: averages a bucket's host
/// gradients over the ranks (tandem/optim/offload.h OffloadOptions::reduce_grads), timing it
/// into `figures`.
std::function<void(int, const Tensor&)> offload_grad_reduce(comm::CommunicatorPtr comm,
                                                            std::shared_ptr<CommFigures> figures,
                                                            std::shared_ptr<GradCompressor> compressor);

/// ZeRO-1 for an offloaded optimizer (OffloadOptions::shard_*): sets `off`'s shard to this
/// rank of `comm` and its hooks to a reduce-scatter (mean) of each bucket's host gradients and
/// an all-gather of the updated blocks, both timed into `figures` (bytes: what this rank passes
/// to the two collectives, the bucket and its block).
void offload_zero_hooks(const comm::CommunicatorPtr& comm, std::shared_ptr<CommFigures> figures,
                        optim::OffloadOptions& off);

}  // namespace tandem::train
