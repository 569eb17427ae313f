// Utilisation of the machine while a run trains, sampled on a thread at a fixed interval:
//   cpu_busy          share of all cores' time not idle (/proc/stat: 1 - (idle + iowait) / total
//                     jiffies between two samples), in [0, 1]; per_core the same per cpuN line
//   process_busy      this process's CPU time (utime + stime of /proc/self/stat) / (wall x cores)
//   loader_busy       the same for the threads named "loader worker" (/proc/self/task/*/comm;
//                     data::Loader names its workers so), in [0, 1] of the machine; loader_cores
//                     is that CPU time / wall time (cores kept busy by the loader)
//   device_memory     bytes in use on the run's device (from a callback: the allocator's figure)
//   gpu_busy, gpu_memory_used/total   from NVML (libnvidia-ml.so.1, loaded with dlopen at run
//                     time; -1 where it is missing or no GPU index was given)
// Sampling stops and the thread is joined in the destructor, on every exit path (a
// std::jthread woken by a condition variable, so a stop never waits out the interval).
// Thread-safety: latest(), take_mean() and the destructor may be called from any one thread
// while the sampler runs; the device-memory callback runs on the sampling thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tandem::metrics {

struct UtilizationSample {
  double cpu_busy = 0;              // [0, 1], all cores
  std::vector<double> per_core;     // [cores] in [0, 1]
  double process_busy = 0;          // [0, 1] of the machine
  double loader_busy = 0;           // [0, 1] of the machine
  double loader_cores = 0;          // cores' worth of loader CPU time
  double device_memory = -1;        // bytes, -1 when not known
  double gpu_busy = -1;             // [0, 1], -1 when NVML is not used
  double gpu_memory_used = -1;      // bytes, -1 when NVML is not used
  double gpu_memory_total = -1;     // bytes
  int samples = 0;                  // samples averaged into this value (0: none yet)
};

/// One line for the epoch line: "cpu 63% (loader 12%), device memory 41.2 MiB, gpu 87% 2.1 GiB".
std::string format_utilization(const UtilizationSample& u);

class UtilizationSampler {
 public:
  struct Options {
    std::chrono::milliseconds interval{500};
    int gpu_index = -1;                        // NVML device index; -1 = no NVML
    std::function<double()> device_memory;     // bytes in use on the run's device (may be empty)
  };

  explicit UtilizationSampler(Options options);
  /// Stops sampling and joins the thread.
  ~UtilizationSampler();
  UtilizationSampler(const UtilizationSampler&) = delete;
  UtilizationSampler& operator=(const UtilizationSampler&) = delete;

  /// The most recent sample (samples == 0 before the first interval has passed).
  UtilizationSample latest() const;
  /// The mean of the samples since the previous call (or the start); when no interval has
  /// passed since, one sample is taken now.
  UtilizationSample take_mean();
  /// Whether NVML was loaded and opened the GPU (false without gpu_index).
  bool has_nvml() const { return nvml_ok_; }
  /// Samplers whose thread is running, process-wide (for tests of the exit paths).
  static int running();

 private:
  struct Impl;
  void loop(std::stop_token stop);
  UtilizationSample sample_now();
  Options opt_;
  std::unique_ptr<Impl> impl_;
  bool nvml_ok_ = false;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  UtilizationSample latest_, sum_;
  std::jthread thread_;
};

}  // namespace tandem::metrics
