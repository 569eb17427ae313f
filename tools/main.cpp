// The `tandem` command: train, eval, serve, generate, info, pack, inspect, report.
// Exit codes: 0 success; 2 bad usage or input (flags, files, devices, NaN loss); 1 other errors.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "tandem/cpu_isa.h"
#include "tandem/comm/communicator.h"
#include "tandem/error.h"
#include "tandem/train/progress.h"

namespace {

// 2 for bad flags or input, 1 for a failure; under mpirun the job is aborted with the same code.
int exit_code_for(tandem::ErrorCode code) {
  int exit_code = 2;
  switch (code) {
    case tandem::ErrorCode::internal:
    case tandem::ErrorCode::distributed:
    case tandem::ErrorCode::out_of_memory: exit_code = 1; break;
    default: break;
  }
  tandem::comm::mpi_exit_with(exit_code);
  return exit_code;
}

// CLI11 messages can span lines; the user gets one line.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// Other runnable threads on the machine now: the median of five reads of /proc/loadavg's
// "running/total" field, 2 ms apart, less the reading thread; -1 when it cannot be read. A
// snapshot, not the 1-minute load average, which still counts a run that just ended (in a
// benchmark, the previous one) for a minute after.
int other_runnable_threads() {
  std::vector<int> seen;
  for (int i = 0; i < 5; ++i) {
    if (i > 0) ::usleep(2000);
    std::FILE* f = std::fopen("/proc/loadavg", "r");
    if (!f) return -1;
    double l1 = 0, l5 = 0, l15 = 0;
    int running = 0, total = 0;
    const int got = std::fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total);
    std::fclose(f);
    if (got != 5) return -1;
    seen.push_back(running - 1);
  }
  std::sort(seen.begin(), seen.end());
  return seen[seen.size() / 2];
}

// libgomp (oneDNN's and tandem's OpenMP runtime) reads its wait policy once, when it loads,
// before main. By default each idle OpenMP thread spins for 300,000 rounds after every parallel
// region. On an idle machine that is the fastest; on a busy one the spinning threads take the
// cores from the thread that has work. bench_step bf16, 2 threads, on the 2-core Xeon: idle,
// 11,174 img/s with the default and 10,607 with 10,000 rounds; at load 8-9, 280-356 against
// 1,210-1,246. So when other threads are runnable on at least half the cores available and the
// user chose nothing (OMP_WAIT_POLICY or GOMP_SPINCOUNT unset), the process starts itself again
// with GOMP_SPINCOUNT=10000. Returns when no restart is needed or exec failed (the run then goes
// on as it is).
void restart_with_short_omp_spin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = ::sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  const int others = other_runnable_threads();
  if (others < 0 || 2 * others < cores) return;
  if (::setenv("GOMP_SPINCOUNT", "10000", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  ::unsetenv("GOMP_SPINCOUNT");  // exec failed: the default policy is in force
}

}  // namespace

// CLI11 words a value its option's type cannot hold as "Could not convert: --epochs = 3e9":
// say what was expected instead. Other parse errors pass unchanged.
std::string conversion_message(const CLI::ParseError& e, const std::vector<CLI::App*>& selected) {
  const std::string what = one_line(e.what());
  // "--model: At Most 1 required but received 2": a flag given twice.
  const size_t at_most = what.find(": At Most 1 required but received ");
  if (at_most != std::string::npos)
    return fmt::format("{} given {} times: expected it once", what.substr(0, at_most),
                       what.substr(at_most + std::strlen(": At Most 1 required but received ")));
  const std::string prefix = "Could not convert: ";
  const size_t eq = what.find(" = ");
  if (what.rfind(prefix, 0) != 0 || eq == std::string::npos || selected.empty()) return what;
  const std::string name = what.substr(prefix.size(), eq - prefix.size());
  const std::string value = what.substr(eq + 3);
  const CLI::Option* opt = selected.front()->get_option_no_throw(name);
  if (!opt) return what;
  if (opt->get_type_name().rfind("INT", 0) == 0) {
    // Values outside 64 bits are refused earlier (tools/commands.cpp): this flag is 32-bit.
    return fmt::format("{}: expected an integer in [{}, {}], got '{}'", name, std::numeric_limits<int>::min(),
                       std::numeric_limits<int>::max(), value);
  }
  return fmt::format("{}: expected a number, got '{}'", name, value);
}

// Prints "tandem: error: MESSAGE" on stderr, on a line of its own even after a half-drawn
// progress bar (which is ended first).
void print_error(const std::string& message) {
  tandem::train::end_progress_line();
  std::fflush(stdout);
  std::fprintf(stderr, "tandem: error: %s\n", one_line(message).c_str());
}

int main(int argc, char** argv) {
  // The CPU floor (tandem/cpu_isa.h) before anything runs a kernel.
  try {
    if (const std::string below = tandem::ops::cpu_floor_problem(); !below.empty()) {
      print_error(below);
      return 1;
    }
  } catch (const tandem::Error& e) {
    print_error(e.what());
    return 2;
  }
  restart_with_short_omp_spin(argv);
  CLI::App app{"tandem: train neural networks with the CPU and the GPU working at the same time.\n"
               "Run `tandem <command> --help` for a command's flags."};
  app.name("tandem");
  app.require_subcommand(1);
  app.set_version_flag("--version", "tandem 0.1.0");
  tandem::train::TrainConfig cfg;
  tandem::tools::add_commands(app, cfg);
  // A first word that is neither a flag nor a command: name it (CLI11 would only say that a
  // command is required).
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    known = known || (argc > 1 && sub->get_name() == argv[1]);
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  if (argc == 1) {
    std::fprintf(stderr, "tandem: error: expected a command: one of %s (see tandem --help)\n", names.c_str());
    return 2;
  }
  if (argv[1][0] != '-') {
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
    std::fprintf(stderr, "tandem: error: %s (see %s)\n", conversion_message(e, selected).c_str(), help.c_str());
    return 2;
  } catch (const tandem::Error& e) {  // a --config run file
    print_error(e.what());
    return exit_code_for(e.code());
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
    print_error(e.what());
    return exit_code_for(e.code());
  } catch (const std::bad_alloc&) {
    print_error("out of host memory");
    return 1;
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
}
