#include "train/home/home_choice.h"

namespace tandem::train {

HomeChoice choose_home(const TrainConfig& cfg, int world_size) {
  HomeChoice h;
  const bool distributed = world_size > 1;
  if (cfg.param_device == "cpu") {
    h.kind = HomeKind::streamed;
    h.shards = cfg.zero == 3 && distributed ? world_size : 1;
    h.delay = cfg.offload_delay;
  } else if (cfg.optimizer_device == "cpu") {
    h.kind = HomeKind::host_master;
    h.shards = cfg.zero == 1 && distributed ? world_size : 1;
    h.delay = cfg.offload_delay;
  } else {
    h.shards = cfg.zero == 1 && distributed ? world_size : 1;
  }
  return h;
}

void HomeChoice::plan(const TrainConfig& cfg, PlanInputs& in) const {
  in.optimizer_offloaded = kind == HomeKind::host_master;
  in.params_streamed = kind == HomeKind::streamed;
  in.offload_delay = delay;
  if (kind != HomeKind::resident && cfg.optimizer_state_device == "disk") {  // the disk tier
    in.state_on_disk = true;
    in.bucket_cap_mb = cfg.bucket_cap_mb;
    in.offload_dir = cfg.offload_dir;
  }
  if (kind == HomeKind::streamed) {
    in.param_prefetch = cfg.param_prefetch;
    in.optimizer_split = cfg.optimizer_split;
    in.zero_shards = shards;
    in.grad_accum_steps = cfg.grad_accum_steps;
  }
}

}  // namespace tandem::train
