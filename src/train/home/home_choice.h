// Which parameter home a run gets (param_home.h says what each one is), chosen from its flags
// once, before anything is allocated: the memory plan asks it what the home will hold, and
// make_param_home builds the home it names. One place maps the flags to a home.
// Thread-safety: plain values; choose_home reads only its arguments.
#pragma once

#include "tandem/train/config.h"
#include "tandem/train/memory_plan.h"

namespace tandem::train {

enum class HomeKind {
  resident,     // parameters and optimizer state beside the compute (plain, data parallel, ZeRO-1)
  host_master,  // --optimizer-device cpu: f32 master weights and moments on the host
  streamed,     // --param-device cpu: parameters at home in host memory, streamed block by block
};

struct HomeChoice {
  HomeKind kind = HomeKind::resident;
  /// The ranks the home's state is cut over: --zero 1 (resident, host master) or --zero 3
  /// (streamed) under `world_size` ranks; 1 otherwise.
  int shards = 1;
  /// The update's delay on a host thread (--offload-delay 0 or 1; 0 for a resident home).
  int delay = 0;

  /// Whether updates run on a host thread (host master, streamed).
  bool host_update() const { return kind != HomeKind::resident; }
  /// What the memory plan needs of this home: the optimizer's place, the update's delay, the
  /// streamed blocks' prefetch and the host's share of the update (--optimizer-split), and
  /// the ranks the host state is sharded over. Reads `cfg` for the home's own knobs.
  void plan(const TrainConfig& cfg, PlanInputs& in) const;
};

/// The home `cfg` asks for under `world_size` ranks (>= 1): streamed for --param-device cpu,
/// host master for --optimizer-device cpu, else resident. Never throws: the flags were
/// validated (train/config.cpp) and the home's builder refuses what does not fit the model.
HomeChoice choose_home(const TrainConfig& cfg, int world_size);

}  // namespace tandem::train
