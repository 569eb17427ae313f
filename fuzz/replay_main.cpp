// Replay driver for builds without libFuzzer: runs LLVMFuzzerTestOneInput once on every file
// named on the command line or found (recursively) in a folder named there. Exit status 0 when
// every input ran; an exception other than tandem::Error ends the run with status 1, naming
// the input. Usage: fuzz_<target> CORPUS_DIR_OR_FILE...
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "fuzz_target.h"

namespace {
int run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
    return 1;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  try {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "replay: %s: uncaught exception: %s\n", p.c_str(), e.what());
    return 1;
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  int failures = 0, inputs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(arg))
        if (e.is_regular_file()) failures += run_file(e.path()), ++inputs;
    } else {
      failures += run_file(arg), ++inputs;
    }
  }
  if (inputs == 0) {
    std::fprintf(stderr, "replay: no inputs (usage: %s CORPUS_DIR_OR_FILE...)\n", argv[0]);
    return 1;
  }
  std::printf("replay: %d inputs, %d failures\n", inputs, failures);
  return failures ? 1 : 0;
}
