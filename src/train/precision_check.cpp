#include "train/precision_check.h"

#include <algorithm>

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/ops.h"

namespace tandem::train {

std::vector<ops::Op> compute_dtype_ops(nn::Module& model) {
  std::vector<ops::Op> out = model.ops_used();
  std::vector<ops::Op> more = nn::CrossEntropyLoss::ops_used();
  more.push_back(ops::Op::amp_scale);
  for (ops::Op op : more)
    if (std::find(out.begin(), out.end(), op) == out.end()) out.push_back(op);
  return out;
}

void check_precision_support(DType dtype, Device device, const std::string& precision,
                             const std::vector<ops::Op>& ops) {
  for (ops::Op op : ops) {
    if (ops::supports(op, dtype, device)) continue;
    const bool bf16 =
        std::all_of(ops.begin(), ops.end(), [&](ops::Op o) { return ops::supports(o, DType::bf16, device); });
    throw_error(ErrorCode::not_available, "train",
                fmt::format("--precision {}: {} does not run in {} on {} ({}); use --precision fp32{}", precision,
                            ops::op_name(op), dtype_name(dtype), device.str(), ops::backend_versions(),
                            bf16 && dtype != DType::bf16 ? " or bf16" : ""));
  }
}

}  // namespace tandem::train
