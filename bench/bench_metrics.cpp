// Cost of watching a run, per unit: one read-back window written to the metrics file and to
// TensorBoard (as tools/run_watch.cpp writes them), and one utilisation sample (/proc reads).
// With the windows per second and samples per second of a run, they give the share of the
// training thread's time (windows) and of one core (samples) that watching costs.
// Usage: bench_metrics [windows=20000] [samples=400]
// Prints: window_us <x> sample_us <y>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/metrics/jsonl_writer.h"
#include "tandem/metrics/tensorboard.h"
#include "tandem/metrics/utilization.h"

int main(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  namespace m = tandem::metrics;
  const int windows = argc > 1 ? std::atoi(argv[1]) : 20000, samples = argc > 2 ? std::atoi(argv[2]) : 400;
  const auto dir = std::filesystem::temp_directory_path() / ("bench_metrics_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  double window_us = 0, sample_us = 0;
  {
    m::JsonLinesWriter jl((dir / "m.jsonl").string());
    m::TensorBoardWriter tb((dir / "tb").string());
    m::UtilizationSampler sampler({std::chrono::hours(1), -1, [] { return 1.0; }});
    const auto t0 = Clock::now();
    for (int i = 0; i < windows; ++i) {
      const m::UtilizationSample u = sampler.latest();
      const double x = 1.0 / (i + 1);
      jl.write({{"type", "window"}, {"epoch", 1}, {"step", i}, {"global_step", i}, {"time_s", x}, {"loss", x},
                {"accuracy", x}, {"lr", x}, {"samples", 1280}, {"images_per_s", x}, {"data_wait_share", x},
                {"utilization", {{"cpu_busy", u.cpu_busy}, {"process_busy", u.process_busy},
                                 {"loader_busy", u.loader_busy}, {"loader_cores", u.loader_cores}}}});
      tb.add_scalars(i, {{"train/loss", x}, {"train/accuracy", x}, {"train/lr", x}, {"train/images_per_s", x},
                         {"train/data_wait_share", x}, {"utilization/cpu_busy", x}, {"utilization/loader_busy", x},
                         {"utilization/device_memory_mib", x}});
    }
    window_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / windows;
    const auto t1 = Clock::now();
    for (int i = 0; i < samples; ++i) sampler.take_mean();  // one sample each: none is pending
    sample_us = std::chrono::duration<double, std::micro>(Clock::now() - t1).count() / samples;
  }
  std::filesystem::remove_all(dir);
  std::printf("window_us %.2f sample_us %.2f\n", window_us, sample_us);
  return 0;
}
