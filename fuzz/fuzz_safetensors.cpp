// Fuzz target: safetensors files (weights, checkpoint state) through load_safetensors, with
// their metadata. Errors: tandem::Error is expected; see fuzz_target.h.
#include <map>

#include "fuzz_target.h"
#include "tandem/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tandem::fuzz::write_scratch("input.safetensors", data, size);
  std::map<std::string, std::string> metadata;
  return tandem::fuzz::expect_error_or_ok([&] { (void)tandem::load_safetensors(path, &metadata); });
}
