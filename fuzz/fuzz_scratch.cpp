// scratch_dir / write_scratch for the fuzz targets.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "fuzz_target.h"

namespace tandem::fuzz {

const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tandem_fuzz_XXXXXX";
    if (!::mkdtemp(pattern.data()))
      throw std::runtime_error("fuzz: cannot create a scratch folder");
    return pattern;
  }();
  return dir;
}

std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("fuzz: cannot write " + path);
  const size_t n = size ? std::fwrite(data, 1, size, f) : 0;
  std::fclose(f);
  if (n != size) throw std::runtime_error("fuzz: short write to " + path);
  return path;
}

void report(const char* outcome) {
  static const bool verbose = [] {
    const char* v = std::getenv("TANDEM_FUZZ_VERBOSE");
    return v && *v && *v != '0';
  }();
  if (verbose) std::fprintf(stderr, "fuzz: %s\n", outcome);
}

}  // namespace tandem::fuzz
