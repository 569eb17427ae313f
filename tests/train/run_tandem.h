// Runs the built `tandem` binary for end-to-end tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tandem::testing {

struct CmdResult {
  int exit_code = -1;
  bool signaled = false;
  std::string out;  // stdout and stderr together, unless `redirect` sends them elsewhere
};

/// Runs `<env> <build>/tandem <args> <redirect>` through the shell and collects its output;
/// `env` is what the shell reads before the binary: NAME=VALUE assignments for the command,
/// then optionally a launcher it runs under (`mpirun -np 1`), or "".
inline CmdResult run_tandem(const std::string& args, const std::string& redirect = "2>&1",
                            const std::string& env = "") {
  const std::string cmd =
      (env.empty() ? "" : env + " ") + std::string(TANDEM_BINARY_DIR) + "/tandem " + args + " " + redirect;
  CmdResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.signaled = WIFSIGNALED(status);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

/// The last non-empty line of `s`.
inline std::string last_line(const std::string& s) {
  const size_t end = s.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  const size_t nl = s.rfind('\n', end);
  const size_t begin = nl == std::string::npos ? 0 : nl + 1;
  return s.substr(begin, end - begin + 1);
}

}  // namespace tandem::testing
