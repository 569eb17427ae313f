#include "tandem/train/info.h"

#include <sys/sysinfo.h>

#include <fmt/format.h>

#include "tandem/cuda.h"
#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/optim/kernels.h"
#include "tandem/stream.h"
#include "tandem/thread_pool.h"

namespace tandem::train {

static std::string device_line(DeviceKind kind) {
  try {
    Runtime& rt = runtime(kind);
    const int n = rt.device_count();
    if (n == 0) return fmt::format("  {}: none found\n", device_kind_name(kind));
    std::string out;
    for (int i = 0; i < n; ++i) {
      const AllocatorStats s = rt.allocator(i).stats();
      out += fmt::format("  {}:{}  allocated {} bytes, reserved {} bytes\n", device_kind_name(kind), i,
                         s.allocated_bytes, s.reserved_bytes);
    }
    return out;
  } catch (const Error& e) {
    return fmt::format("  {}: {}\n", device_kind_name(kind), e.what());
  }
}

std::string system_info() {
  std::string out = "tandem 0.1.0\n";
  struct sysinfo si {};
  double mem_gib = 0;
  if (::sysinfo(&si) == 0) mem_gib = static_cast<double>(si.totalram) * si.mem_unit / (1 << 30);
  out += fmt::format("cpu: {} cores available, {:.1f} GiB memory, SIMD level {} (best supported {})\n",
                     available_cores(), mem_gib, optim::simd_level_name(),
                     optim::simd_level_name(optim::best_simd_level()));
  out += fmt::format("backends: {}\n", ops::backend_versions());
  out += fmt::format("          {}\n", cuda::versions());
  out += "devices:\n  cpu\n";
  out += device_line(DeviceKind::virt);
  out += device_line(DeviceKind::cuda);
  for (int i = 0; i < cuda::device_count(); ++i) {
    const cuda::DeviceProperties p = cuda::device_properties(i);
    out += fmt::format("    cuda:{} {}: {:.1f} GiB, {} SMs, compute capability {}.{}\n", i, p.name,
                       static_cast<double>(p.total_memory_bytes) / (1 << 30), p.multiprocessor_count, p.major,
                       p.minor);
  }
  return out;
}

}  // namespace tandem::train
