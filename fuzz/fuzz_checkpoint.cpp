// Fuzz target: a checkpoint file (safetensors with tandem's metadata: format, version, CRC-32
// per tensor, the state JSON) in a checkpoint folder without a manifest, through
// locate_checkpoint (the folder path `--resume DIR` takes), then the state's "epochs" entries
// through stats_from_json as resume reads them. Errors: tandem::Error is expected; see
// fuzz_target.h.
#include "fuzz_target.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/run_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::train::checkpoint;
  const std::string path = tandem::fuzz::write_scratch(checkpoint_file_name(1), data, size);
  return tandem::fuzz::expect_error_or_ok([&] {
    const Located found = locate_checkpoint(tandem::fuzz::scratch_dir());
    const auto& state = found.file.state;
    const auto epochs = state.find("epochs");
    if (epochs != state.end() && epochs->is_array())
      for (const auto& e : *epochs) (void)stats_from_json(e, path);
  });
}
