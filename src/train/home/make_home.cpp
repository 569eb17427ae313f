#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "tandem/optim/adam.h"
#include "tandem/optim/kernels.h"
#include "tandem/optim/offload.h"
#include "train/dist/dist_setup.h"
#include "train/dist/grad_compression.h"
#include "train/dist/grad_reducer.h"
#include "train/dist/zero_optimizer.h"
#include "train/home/home_choice.h"
#include "train/home/homes.h"
#include "train/place/param_stream.h"
#include "train/place/stream_layout.h"
#include "train/run_builder.h"

namespace tandem::train {

namespace {

void set_simd(const std::string& simd) {
  if (simd.empty()) return;
  const optim::SimdLevel level = optim::parse_simd_level(simd);
  TD_CHECK(optim::simd_level_supported(level), ErrorCode::not_available, "train",
           "--simd {}: this CPU does not support it (best here: {})", simd,
           optim::simd_level_name(optim::best_simd_level()));
  optim::set_simd_level(level);
}

optim::OptimizerOptions optimizer_options(const TrainConfig& cfg) {
  optim::OptimizerOptions oo;
  oo.lr = cfg.lr;
  oo.weight_decay = cfg.weight_decay;
  oo.momentum = cfg.momentum;
  oo.nesterov = cfg.nesterov;
  oo.betas = {cfg.beta1, cfg.beta2};
  oo.eps = cfg.eps;
  oo.moments_dtype = cfg.optimizer_moments == "bf16" ? DType::bf16 : DType::f32;
  return oo;
}

// Offloaded: master weights and moments on the host, gradients copied per bucket during
// backward (the hook), updated parameters uploaded per bucket (tandem/optim/offload.h).
ParamHomePtr host_master_home(Run& r, const TrainConfig& cfg, bool split, int64_t sparsity_warmup) {
  optim::OffloadOptions off;
  off.bucket_cap_mb = cfg.bucket_cap_mb;
  off.delay = cfg.offload_delay;
  off.delay_warmup_steps = cfg.offload_delay_warmup;
  // Mixed precision: gradients down and the forward's weight copies up in the compute dtype.
  TD_CHECK_ARG(!split || r.compute_dtype == DType::f32, "train",
               "--precision {} with --optimizer-device cpu on a split run: not supported (the replicas' copies "
               "are not uploaded); expected --precision fp32 or --optimizer-device device",
               cfg.precision);
  off.transfer_dtype = r.compute_dtype;
  if (cfg.optimizer_state_device == "disk") {  // master and moments in files
    off.disk_dir = cfg.offload_dir;
    std::tie(off.disk_model_read_gbps, off.disk_model_write_gbps) = parse_disk_gbps(cfg.disk_gbps);
  }
  // Loss scaling and clipping: checked on the host after updates that ran speculatively.
  if (r.scaler) off.loss_scale = r.scaler->state();
  off.clip_grad_norm = cfg.clip_grad_norm;
  std::shared_ptr<CommFigures> figures;
  if (r.comm && r.comm->world_size() > 1) {  // each bucket's host gradients are averaged over the ranks
    off.first_bucket_cap_mb = std::min(1.0, cfg.bucket_cap_mb);
    figures = std::make_shared<CommFigures>();
    if (cfg.zero == 1) {  // ZeRO-Offload: reduce-scatter into this rank's blocks, all-gather the updated ones
      offload_zero_hooks(r.comm, figures, off);
    } else {
      off.reduce_grads = offload_grad_reduce(r.comm, figures, make_grad_compressor(cfg.grad_compression, sparsity_warmup));
    }
  }
  auto offloaded = std::make_unique<optim::OffloadOptimizer>(cfg.optimizer, r.params, optimizer_options(cfg), off);
  // A split's gradients are complete only once combined after every replica's backward: its
  // buckets launch at step(), without the hook.
  if (!split) offloaded->attach(*r.model);
  return make_host_master_home(std::move(offloaded), std::move(figures),
                               off.loss_scale.defined() || off.clip_grad_norm > 0);
}

// Beside the parameters: the device's optimizer (ZeRO-1's under several ranks) and, under
// several ranks, the reducer of the gradient buckets.
ParamHomePtr resident_home(Run& r, const TrainConfig& cfg, bool split, int64_t sparsity_warmup) {
  const optim::OptimizerOptions oo = optimizer_options(cfg);
  if (!r.comm || r.comm->world_size() == 1)
    return make_resident_home(optim::make_optimizer(cfg.optimizer, r.params, oo), nullptr);
  // The reducer is built after the optimizer. A split's gradients are complete only once
  // combined: its buckets launch at backward_done(), after the combine, without the hook.
  auto reducer = [&] {
    return std::make_unique<GradReducer>(r.device_comm, *r.model, r.params, r.device, cfg.bucket_cap_mb,
                                         make_grad_compressor(cfg.grad_compression, sparsity_warmup), !split);
  };
  if (cfg.zero == 1) {
    auto zero = std::make_unique<ZeroOptimizer>(cfg.optimizer, r.params, oo, r.device_comm);
    return make_zero1_home(std::move(zero), reducer());
  }
  auto opt = optim::make_optimizer(cfg.optimizer, r.params, oo);
  return make_resident_home(std::move(opt), reducer());
}

}  // namespace

bool uses_loss_scaler(const TrainConfig& cfg) {
  return cfg.loss_scale == "dynamic" || (cfg.loss_scale == "auto" && precision_dtype(cfg.precision) == DType::f16);
}

std::shared_ptr<ParamStreamer> home_parameters(Run& r, const TrainConfig& cfg, const comm::CommunicatorPtr& comm) {
  const bool distributed = comm && comm->world_size() > 1;
  const HomeChoice home = choose_home(cfg, comm ? comm->world_size() : 1);
  if (home.kind != HomeKind::streamed) {
    if (!r.device.is_host()) r.model->to(r.device);  // before the optimizer: its state follows
    return nullptr;
  }
  // --param-device cpu: the parameters stay in (pinned) host memory, where the host optimizer
  // updates them; the blocks are streamed to the device around their compute. Under mpirun
  // every rank keeps whole homes and the host gradients are all-reduced (make_param_home);
  // --zero 3: the host state is sharded over the ranks.
  const bool zero3 = home.shards > 1;
  TD_CHECK_ARG(streamable(*r.model) && cfg.place.empty() && cfg.devices.empty(), "train",
               "--param-device cpu: expected a GPT or a ResNet (--model {}) on one --device, without --place or "
               "--devices",
               cfg.model);
  TD_CHECK_ARG(!distributed || cfg.zero != 1, "train",
               "--param-device cpu with --zero 1: not supported yet (each rank would update and keep the optimizer "
               "state of the parts it owns and send their new values to the others after the step's checks; "
               "that exchange is not written); expected --zero 0 (whole host homes on every rank) or --zero 3 "
               "(sharded host homes)");
  TD_CHECK_ARG(!distributed || zero3 || cfg.optimizer_split == 1, "train",
               "--param-device cpu --optimizer-split {} under mpirun: not supported yet (the device's parts keep "
               "their gradients on the device, where the host all-reduce does not reach); expected --optimizer-split 1",
               cfg.optimizer_split);
  if (distributed) {  // the same run and values on every rank before the homes are made (host buffers)
    comm->set_timeout_seconds(cfg.dist_timeout);
    check_same_run(*comm, cfg, *r.model);
    if (!r.lazy_values) {
      broadcast_model(*comm, *r.model, Device{});
    } else if (!cfg.init.empty()) {  // every rank writes its shards from its own copy of the file
      check_same_file(*comm, r.init_fingerprint, "--init " + cfg.init);
    }
  }
  StreamLayout layout = stream_layout(*r.model, cfg.model);
  layout.source = r.lazy_values;
  layout.values_to_disk = cfg.optimizer_state_device == "disk";  // stream_state_to_disk moves them
  const int device_parts = device_parts_for_split(part_elements(layout), cfg.optimizer_split);
  return std::make_shared<ParamStreamer>(std::move(layout), r.device, cfg.param_prefetch, device_parts,
                                         zero3 ? comm : nullptr);
}

ParamHomePtr make_param_home(Run& r, const TrainConfig& cfg, bool split, std::shared_ptr<ParamStreamer> stream) {
  // topk's sparsity warms up with the learning rate (--warmup-epochs).
  const int64_t sparsity_warmup = warmup_steps(cfg, r.steps_per_epoch());
  set_simd(cfg.simd);
  if (stream) {  // the optimizer over the streamer's parameters (--zero 3: this rank's pieces; the streamer reduces)
    auto opt = optim::make_optimizer(cfg.optimizer, stream->optimizer_params(r.params), optimizer_options(cfg));
    if (auto* adam = dynamic_cast<optim::Adam*>(opt.get()); adam && stream->sharded())  // bf16 moments' noise
      adam->set_rounding_streams(stream->shards()->rounding_streams(r.params));
    // Each part is updated on the host while the backward goes on; clipping and loss scaling
    // check every gradient after them, and roll back what they must (set_checks; the blocks'
    // gradients then keep homes of their own, else they come down into transient slabs).
    // --zero 3 holds the updates instead: each part is reduce-scattered during backward, and
    // the shards are updated after the verdict over every rank's flags and the global norm.
    const bool checks = r.scaler || cfg.clip_grad_norm > 0;
    HeldChecks held;
    if (stream->sharded() && checks) {
      stream->set_host_update(opt.get());
      stream->set_hold_updates(true);
      held = HeldChecks{r.scaler.get(), cfg.clip_grad_norm, r.params};
    } else {
      stream->set_host_update(opt.get(), cfg.offload_delay, cfg.offload_delay_warmup, /*transient_grads=*/!checks);
      if (checks) stream->set_checks(cfg.clip_grad_norm, r.scaler.get());
    }
    if (cfg.grad_compression == "bf16" || cfg.grad_compression == "fp16")  // --zero 3's reduce-scatters
      stream->set_grad_compression(cfg.grad_compression == "bf16" ? DType::bf16 : DType::f16);
    // Data parallel over whole homes: each part's host gradients averaged over the ranks on the
    // update thread before its update (compressed as the resident reducer's buckets are).
    std::shared_ptr<CommFigures> figures;
    if (!stream->sharded() && r.comm && r.comm->world_size() > 1) {
      figures = std::make_shared<CommFigures>();
      std::shared_ptr<GradCompressor> compressor = make_grad_compressor(cfg.grad_compression, sparsity_warmup);
      if (compressor) {  // topk selects per tensor of a bucket
        const auto buckets = stream->grad_reduce_buckets();
        for (size_t k = 0; k < buckets.size(); ++k) compressor->set_layout(static_cast<int>(k), buckets[k]);
      }
      stream->set_grad_reduce(offload_grad_reduce(r.comm, figures, std::move(compressor)));
    }
    if (cfg.optimizer_state_device == "disk") stream_state_to_disk(*stream, cfg);  // master and state in files
    comm::CommunicatorPtr comm = r.comm && r.comm->world_size() > 1 ? r.comm : nullptr;
    return make_streamed_home(std::move(opt), std::move(stream), std::move(comm), std::move(held), std::move(figures));
  }
  if (choose_home(cfg, 1).kind == HomeKind::host_master) return host_master_home(r, cfg, split, sparsity_warmup);
  return resident_home(r, cfg, split, sparsity_warmup);
}

}  // namespace tandem::train
