#include "tandem/train/info.h"

#include <sys/sysinfo.h>

#include <fmt/format.h>

#include "tandem/cuda.h"
#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/cpu_isa.h"
#include "tandem/op_support.h"
#include "tandem/optim/kernels.h"
#include "tandem/stream.h"
#include "tandem/thread_pool.h"

namespace tandem::train {

std::string system_info() {
  std::string out = "tandem 0.1.0\n";
  struct sysinfo si {};
  double mem_gib = 0;
  if (::sysinfo(&si) == 0) mem_gib = static_cast<double>(si.totalram) * si.mem_unit / (1 << 30);
  out += fmt::format("cpu: {} cores available, {:.1f} GiB memory, SIMD level {} (best supported {})\n",
                     available_cores(), mem_gib, optim::simd_level_name(),
                     optim::simd_level_name(optim::best_simd_level()));
  const ops::CpuIsa isa = ops::cpu_isa(), detected = ops::detected_cpu_isa();
  out += fmt::format("     instruction set {}{}; bf16 {}\n", ops::cpu_isa_name(isa),
                     isa == detected ? std::string(" (as detected)")
                                     : fmt::format(" (detected {}, capped by the environment)", ops::cpu_isa_name(detected)),
                     ops::compute_note(DType::bf16, Device{}).empty() ? "computed natively"
                                                                      : "stored, computed in f32");
  out += fmt::format("backends: {}\n", ops::backend_versions());
  out += fmt::format("          {}\n", cuda::versions());
  out += "devices:\n" + describe_devices();
  return out;
}

}  // namespace tandem::train
