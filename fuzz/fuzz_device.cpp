// Fuzz target: the `--device` string through DeviceSpec::parse, every option then read as a
// number as the runtimes read them. Errors: tandem::Error is expected; see fuzz_target.h.
#include <string>

#include "fuzz_target.h"
#include "tandem/device.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return tandem::fuzz::expect_error_or_ok([&] {
    const tandem::DeviceSpec spec = tandem::DeviceSpec::parse(text);
    (void)spec.device.str();
    for (const auto& kv : spec.options) (void)spec.option(kv.first, 0.0);
  });
}
