// Fuzz target: `tandem train` flags and run files, parsed by the `tandem` program's own command
// set (tools/commands.h add_commands: CLI11 with tandem's strict integer values, the data,
// device, checkpoint and serving flags, the --config TOML run file through toml++, the
// resolved configuration written back, then train::validate as --print-config does).
// Input layout: the words before the first NUL byte, one per line, are command-line arguments
// after `tandem train`; the bytes after it are the run file (`--config`). Without a NUL byte
// the whole input is the run file. Nothing is trained: --print-config is always given.
// Expected: CLI::Error (a usage error, exit 2) or tandem::Error; anything else (another
// exception escaping the parse, which `tandem` would not catch) is a finding.
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "config_file.h"
#include "fuzz_target.h"
#include "serving.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  const char* begin = reinterpret_cast<const char*>(data);
  const char* nul = static_cast<const char*>(std::memchr(begin, 0, size));
  std::vector<std::string> args = {"tandem", "train"};
  const char* file = begin;
  if (nul) {
    for (const char* p = begin; p < nul;) {
      const char* eol =
          static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(nul - p)));
      if (!eol) eol = nul;
      args.emplace_back(p, eol);
      p = eol + 1;
    }
    file = nul + 1;
  }
  const std::string path = fuzz::write_scratch("run.toml", reinterpret_cast<const uint8_t*>(file),
                                               size - static_cast<size_t>(file - begin));
  args.insert(args.end(), {"--config", path, "--print-config"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  // The flags of earlier inputs are not carried over (the commands bind process-wide structs).
  tools::run_file_flags() = {};
  tools::serving_flags() = {};
  return fuzz::expect_error_or_ok([&] {
    CLI::App app{"tandem"};
    app.name("tandem");
    app.require_subcommand(1);
    train::TrainConfig cfg;
    tools::add_commands(app, cfg);
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::Error& e) {
      fuzz::report(e.what());
      return;
    }
    train::validate(cfg, "train");
  });
}
