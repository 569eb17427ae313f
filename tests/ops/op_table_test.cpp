// Every op of tandem/op_list.h x every float dtype its backend lists x every backend (cpu,
// virt, cuda) against the float64 reference of its row (op_table.h). Entries are named
// OpTable/Table.MatchesReference/<op>_cpu_virt and .../<op>_cuda; a failure names the op, the
// dtype and the device. The cuda entries skip, saying what they need, without a CUDA device.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "backend/cuda/cuda_support.h"
#include "ops/op_table.h"
#include "tandem/backend.h"
#include "tandem/cuda.h"

namespace tandem::testing::op_table {
namespace {

// A row on the host backends (cpu and virt) or on cuda: each ctest entry runs one row in
// every dtype its backends list (one process per entry, so few entries keep the suite fast).
using Case = std::tuple<size_t, bool>;  // row index, cuda

// The dtypes a device kind's table lists for `op`, of f32, bf16 and f16. cpu and virt answer
// with the cpu table; cuda's is plain data, so its entries exist in every build.
std::vector<DType> listed_dtypes(ops::Op op, DeviceKind kind) {
  const ops::DTypes d =
      kind == DeviceKind::cuda ? ops::kCudaSupport.dtypes(op) : ops::cpu_backend().op_support().dtypes(op);
  std::vector<DType> r;
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    if (d.has(t)) r.push_back(t);
  return r;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (bool cuda : {false, true})
    for (size_t i = 0; i < all_rows().size(); ++i) cases.emplace_back(i, cuda);
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const auto& [i, cuda] = info.param;
  return std::string(ops::op_name(all_rows()[i].op)) + (cuda ? "_cuda" : "_cpu_virt");
}

class Table : public ::testing::TestWithParam<Case> {};

TEST_P(Table, MatchesReference) {
  const auto& [i, cuda] = GetParam();
  const Row& row = all_rows()[i];
  if (cuda && !cuda::built()) GTEST_SKIP() << "needs a CUDA device: this build has no CUDA backend";
  if (cuda && cuda::device_count() == 0) GTEST_SKIP() << "needs a CUDA device: none is present";
  std::vector<DeviceKind> kinds{DeviceKind::cuda};
  if (!cuda) kinds = {DeviceKind::cpu, DeviceKind::virt};
  for (DeviceKind kind : kinds) {
    const Device dev{kind, 0};
    const std::vector<DType> dtypes = listed_dtypes(row.op, kind);
    EXPECT_FALSE(dtypes.empty()) << ops::op_name(row.op) << " runs in no float dtype on " << dev.str();
    for (DType t : dtypes) {
      EXPECT_TRUE(ops::supports(row.op, t, dev)) << ops::op_name(row.op) << " " << dtype_name(t) << " on "
                                                 << dev.str() << " is listed by its table but supports() answers no";
      for (const std::string& f : run_row(row, t, dev)) ADD_FAILURE() << f;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OpTable, Table, ::testing::ValuesIn(all_cases()), case_name);

// The table has exactly one row per op of the list.
TEST(OpTable, OneRowPerOp) {
  std::multiset<int> seen;
  for (const Row& row : all_rows()) seen.insert(static_cast<int>(row.op));
  for (int i = 0; i < ops::kOpCount; ++i)
    EXPECT_EQ(seen.count(i), 1u) << ops::op_name(static_cast<ops::Op>(i)) << " needs exactly one row";
  EXPECT_EQ(all_rows().size(), static_cast<size_t>(ops::kOpCount));
}

}  // namespace
}  // namespace tandem::testing::op_table
