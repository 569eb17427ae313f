// Fuzz target: IDX files (MNIST's format), raw or gzip, through read_idx as `tandem train`
// reads them. Errors: tandem::Error is expected; see fuzz_target.h.
#include "fuzz_target.h"
#include "tandem/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // gzip magic picks the name read_idx sees, as a user's .gz file would.
  const bool gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  const std::string path =
      tandem::fuzz::write_scratch(gz ? "input-idx-ubyte.gz" : "input-idx-ubyte", data, size);
  return tandem::fuzz::expect_error_or_ok([&] { (void)tandem::data::read_idx(path); });
}
