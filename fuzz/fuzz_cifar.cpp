// Fuzz target: CIFAR-10 and CIFAR-100 record files through the Cifar10 / Cifar100 readers
// (the test split: test_batch.bin, test.bin), every sample read back. Errors: tandem::Error is
// expected; see fuzz_target.h.
#include <vector>

#include "fuzz_target.h"
#include "tandem/data/cifar.h"

namespace {
void read_all(const tandem::data::Dataset& d) {
  std::vector<uint8_t> scratch;
  for (int64_t i = 0; i < d.size(); ++i) (void)d.get(i, scratch);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::data;
  const std::string& dir = tandem::fuzz::scratch_dir();
  tandem::fuzz::write_scratch("test_batch.bin", data, size);
  tandem::fuzz::write_scratch("test.bin", data, size);
  tandem::fuzz::expect_error_or_ok([&] { read_all(Cifar10(dir, Split::test)); });
  tandem::fuzz::expect_error_or_ok(
      [&] { read_all(Cifar100(dir, Split::test, CifarLabel::coarse)); });
  return 0;
}
