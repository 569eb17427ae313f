// The `tandem` command: train, eval, info.
// Exit codes: 0 success; 2 bad usage or input (flags, files, devices, NaN loss); 1 other errors.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "tandem/error.h"

namespace {

int exit_code_for(tandem::ErrorCode code) {
  switch (code) {
    case tandem::ErrorCode::internal:
    case tandem::ErrorCode::out_of_memory: return 1;
    default: return 2;
  }
}

// CLI11 messages can span lines; the user gets one line.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

// After a live progress bar on a terminal the cursor sits mid-line: start the error on a new one.
const char* error_prefix() { return ::isatty(STDOUT_FILENO) && ::isatty(STDERR_FILENO) ? "\n" : ""; }

int main(int argc, char** argv) {
  CLI::App app{"tandem: train neural networks with the CPU and the GPU working at the same time.\n"
               "Run `tandem <command> --help` for a command's flags."};
  app.name("tandem");
  app.require_subcommand(1);
  app.set_version_flag("--version", "tandem 0.1.0");
  tandem::train::TrainConfig cfg;
  tandem::tools::add_train_command(app, cfg);
  tandem::tools::add_eval_command(app, cfg);
  tandem::tools::add_info_command(app);
  // A first word that is neither a flag nor a command: name it (CLI11 would only say that a
  // command is required).
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "tandem: error: unknown command '%s': expected one of %s (see tandem --help)\n", argv[1],
                   names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Point to the help of the command whose flags were wrong.
    const std::vector<CLI::App*> selected = app.get_subcommands();
    const std::string help = selected.empty() ? "tandem --help" : "tandem " + selected.front()->get_name() + " --help";
    std::fprintf(stderr, "tandem: error: %s (see %s)\n", one_line(e.what()).c_str(), help.c_str());
    return 2;
  }
  try {
    const int code = tandem::tools::run_selected(app, cfg);
    // Output lost to a full disk or a closed stdout is an error, not a silent success.
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "tandem: error: cannot write to standard output: %s\n", std::strerror(errno));
      return code ? code : 1;
    }
    return code;
  } catch (const tandem::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%standem: error: %s\n", error_prefix(), one_line(e.what()).c_str());
    return exit_code_for(e.code());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%standem: error: out of host memory\n", error_prefix());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%standem: error: %s\n", error_prefix(), one_line(e.what()).c_str());
    return 1;
  }
}
