// Where the time of a run went, computed from the profiler's spans: time per stage, the busy
// time per step of each resource (loader workers, copy stream, compute stream or training
// thread), data-wait share, device-idle share, overlap efficiency, throughput and one line of
// advice that names the limiting stage and the knob to turn.
//
// Definitions (times in seconds; only the parts of spans inside training steps count, so
// evaluation and warm-up between epochs do not):
//   step time          mean duration of the "step" spans of the training thread
//   input per step     load + augment + collate time / steps / loader parallelism
//                      (num_workers, or 1 when batches are made in the training thread)
//   h2d per step       host-to-device copy time on stream tracks / steps
//   compute per step   busy time of the busiest device stream (everything but copies) / steps;
//                      on the cpu device, forward + backward + optimizer on the training thread
//   d2h per step       device-to-host copy time on stream tracks / steps
//   transfer per step  max(h2d, d2h per step): the link's two directions run side by side
//   hidden share       the part of the copies' time (h2d + d2h) during which the busiest device
//                      stream computed: 1 when every copy overlaps compute
//   host optimizer     optimizer time of the host track busiest with it / steps (nested spans
//                      once; the host updates the parameters: --param-device cpu)
//   overlap efficiency max(input, transfer, compute per step) / step time: 1 when the slowest
//                      resource never waits for the others
//   data-wait share    (wait_data - wait_device) time on host tracks / step time: a wait for a
//                      batch that is spent waiting for a copy or a free device buffer
//                      (back-pressure from the device) is not a wait for data
//   device-idle share  1 - compute per step / step time (0 when no device stream recorded)
//   fed step time      max(compute, h2d per step, (1 - data-wait share) x step time): the
//                      step if batches were always ready (the training thread's own work
//                      included)
//   workers needed     ceil(input per step x parallelism / fed step time): loader workers
//                      that would make a batch as fast as the rest of the step consumes it
// Thread-safety: summarize() reads the global profiler (call it after the run); the rest are
// pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/profile/profiler.h"

namespace tandem::profile {

/// The run's settings that the summary needs for throughput and advice.
struct SummaryOptions {
  int num_workers = 0;      // loader workers (the loader stages' parallelism; 0 = training thread)
  int cores = 1;            // CPU cores available to the process
  int64_t batch_size = 0;   // samples per step, for images/s (0 = not known)
  int prefetch_factor = 0;  // batches in flight per worker (0 = not known)
  int prefetch_depth = 0;   // batches copied to the device ahead (0 = no device prefetcher)
  bool autotuned = false;   // num_workers chosen by the autotuner (--num-workers auto; changes the advice)
  bool packed = false;      // the data is read from packed shards already (the advice then does not suggest them)
  bool params_streamed = false;  // the parameters live on the host and are streamed (--param-device cpu)
  bool update_delayed = false;   // their host update runs during the next step (--offload-delay 1)
  std::string note;         // printed first by Summary::text(), e.g. the device's planning_note
};

struct Summary {
  double wall_seconds = 0;                                     // first span begin to last span end
  double stage_seconds[static_cast<int>(Stage::count_)] = {};  // summed over all tracks, whole run
  double device_stage_seconds[static_cast<int>(Stage::count_)] = {};  // the stream tracks' part
  int64_t steps = 0;                // "step" spans on host tracks
  double step_seconds = 0;          // mean step time
  double input_seconds = 0;         // input per step (see above)
  double h2d_seconds = 0;           // host-to-device copies per step
  double d2h_seconds = 0;           // device-to-host copies per step
  double transfer_seconds = 0;      // max(h2d, d2h) per step
  double hidden_share = 0;          // in [0, 1]: the copies' time that overlaps device compute
  double host_optimizer_seconds = 0;  // the busiest host track's optimizer time per step
  std::string host_optimizer_track;   // that track's name
  double compute_seconds = 0;       // compute per step
  double optimizer_seconds = 0;     // the optimizer's part of compute per step
  double load_seconds = 0;          // load per step (before dividing by the parallelism)
  double augment_seconds = 0;       // augment per step (before dividing by the parallelism)
  double data_wait_share = 0;       // in [0, 1]
  double device_idle_share = 0;     // in [0, 1]; 0 on cpu
  double overlap_efficiency = 0;    // in [0, 1] (can exceed 1 slightly from clock granularity)
  double images_per_s = 0;          // batch_size / step time (0 when batch_size is unknown)
  bool has_device = false;          // a device stream recorded compute spans
  double fed_step_seconds = 0;      // the step without data waits (see workers_needed)
  int workers_needed = 0;           // input-bound runs: loader workers that would keep up (see above)
  std::string note;                 // SummaryOptions::note
  std::string limiting_stage;       // "input", "transfer", "compute", "optimizer", "host" or ""
  std::string advice;               // one line, names the stage and the knob to turn
  std::string text() const;         // multi-line table + advice
};

/// Summarises spans and tracks (as Profiler::spans() / tracks() return them).
Summary summarize(const std::vector<Profiler::Span>& spans, const std::vector<Profiler::Track>& tracks,
                  const SummaryOptions& options);
/// Summarises the global profiler's spans.
Summary summarize(const SummaryOptions& options);
/// Same as summarize({num_workers, cores}).
Summary summarize(int num_workers, int cores);

}  // namespace tandem::profile
