#include "tandem/metrics/utilization.h"

#include <algorithm>

#include <fmt/format.h>

#include "nvml.h"
#include "proc_stat.h"

namespace tandem::metrics {

namespace {
std::atomic<int> g_running{0};
constexpr const char* kLoaderThread = "loader worker";  // data::Loader's workers' thread name
}  // namespace

struct UtilizationSampler::Impl {
  explicit Impl(int gpu) : nvml(gpu) {}
  detail::Nvml nvml;
  std::vector<detail::CpuTicks> cpu;
  uint64_t process = 0, loader = 0;
  std::chrono::steady_clock::time_point t;
};

std::string format_utilization(const UtilizationSample& u) {
  if (u.samples == 0) return "cpu n/a";
  constexpr double kMiB = 1024.0 * 1024.0, kGiB = kMiB * 1024.0;
  std::string s = fmt::format("cpu {:.0f}% (loader {:.0f}%)", 100 * u.cpu_busy, 100 * u.loader_busy);
  if (u.device_memory >= 0) s += fmt::format(", device memory {:.1f} MiB", u.device_memory / kMiB);
  if (u.gpu_busy >= 0) s += fmt::format(", gpu {:.0f}% {:.2f}/{:.1f} GiB", 100 * u.gpu_busy, u.gpu_memory_used / kGiB,
                                        u.gpu_memory_total / kGiB);
  return s;
}

UtilizationSampler::UtilizationSampler(Options options)
    : opt_(std::move(options)), impl_(std::make_unique<Impl>(opt_.gpu_index)) {
  nvml_ok_ = impl_->nvml.ok();
  impl_->cpu = detail::read_cpu_ticks();
  impl_->process = detail::read_process_ticks();
  impl_->loader = detail::read_thread_ticks(kLoaderThread);
  impl_->t = std::chrono::steady_clock::now();
  ++g_running;  // counted from here, so that running() says so as soon as the constructor returns
  try {
    thread_ = std::jthread([this](std::stop_token st) { loop(st); });
  } catch (...) {
    --g_running;
    throw;
  }
}

UtilizationSampler::~UtilizationSampler() {
  thread_.request_stop();  // wakes the wait in loop() through the stop token
  if (thread_.joinable()) thread_.join();
}

int UtilizationSampler::running() { return g_running.load(); }

// Deltas since the previous sample; called with mu_ held (the /proc state lives in impl_).
UtilizationSample UtilizationSampler::sample_now() {
  Impl& m = *impl_;
  UtilizationSample u;
  u.samples = 1;
  const auto now = std::chrono::steady_clock::now();
  const double wall = std::chrono::duration<double>(now - m.t).count();
  const std::vector<detail::CpuTicks> cpu = detail::read_cpu_ticks();
  auto share = [](const detail::CpuTicks& a, const detail::CpuTicks& b) {
    const double total = static_cast<double>(b.total - a.total);
    return b.total > a.total && b.busy >= a.busy ? static_cast<double>(b.busy - a.busy) / total : 0.0;
  };
  if (cpu.size() == m.cpu.size() && !cpu.empty()) {
    u.cpu_busy = share(m.cpu[0], cpu[0]);
    for (size_t i = 1; i < cpu.size(); ++i) u.per_core.push_back(share(m.cpu[i], cpu[i]));
  }
  const double cores = std::max<double>(1, static_cast<double>(u.per_core.size()));
  const uint64_t process = detail::read_process_ticks(), loader = detail::read_thread_ticks(kLoaderThread);
  const double tps = detail::ticks_per_second();
  if (wall > 0) {
    const double proc_s = process > m.process ? static_cast<double>(process - m.process) / tps : 0;
    // A worker that left takes its ticks with it: a negative delta counts as none.
    const double load_s = loader > m.loader ? static_cast<double>(loader - m.loader) / tps : 0;
    u.process_busy = std::min(1.0, proc_s / wall / cores);
    u.loader_cores = load_s / wall;
    u.loader_busy = std::min(1.0, u.loader_cores / cores);
  }
  if (opt_.device_memory) u.device_memory = opt_.device_memory();
  if (nvml_ok_ && !m.nvml.query(u.gpu_busy, u.gpu_memory_used, u.gpu_memory_total))
    u.gpu_busy = u.gpu_memory_used = u.gpu_memory_total = -1;
  m.cpu = cpu;
  m.process = process;
  m.loader = loader;
  m.t = now;
  return u;
}

static void accumulate(UtilizationSample& sum, const UtilizationSample& u) {
  if (sum.samples == 0) {
    sum = u;
    return;
  }
  sum.cpu_busy += u.cpu_busy;
  if (sum.per_core.size() == u.per_core.size())
    for (size_t i = 0; i < u.per_core.size(); ++i) sum.per_core[i] += u.per_core[i];
  sum.process_busy += u.process_busy;
  sum.loader_busy += u.loader_busy;
  sum.loader_cores += u.loader_cores;
  sum.device_memory += u.device_memory;
  sum.gpu_busy += u.gpu_busy;
  sum.gpu_memory_used += u.gpu_memory_used;
  sum.gpu_memory_total += u.gpu_memory_total;
  sum.samples += u.samples;
}

void UtilizationSampler::loop(std::stop_token stop) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop.stop_requested()) {
    if (cv_.wait_for(lock, stop, opt_.interval, [] { return false; })) break;
    if (stop.stop_requested()) break;
    latest_ = sample_now();
    accumulate(sum_, latest_);
  }
  --g_running;
}

UtilizationSample UtilizationSampler::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

UtilizationSample UtilizationSampler::take_mean() {
  std::lock_guard<std::mutex> lock(mu_);
  if (sum_.samples == 0) {
    latest_ = sample_now();
    accumulate(sum_, latest_);
  }
  UtilizationSample m = sum_;
  const double n = m.samples;
  for (double* v : {&m.cpu_busy, &m.process_busy, &m.loader_busy, &m.loader_cores, &m.device_memory, &m.gpu_busy,
                    &m.gpu_memory_used, &m.gpu_memory_total})
    *v /= n;
  for (double& c : m.per_core) c /= n;
  sum_ = UtilizationSample{};
  return m;
}

}  // namespace tandem::metrics
