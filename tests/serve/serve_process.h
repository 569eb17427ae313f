// A `tandem` process started in the background for the serving tests: its pid, its output
// file, and the port it writes to --port-file once listening.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace tandem::testing {

class TandemProcess {
 public:
  /// Starts `<build>/tandem <args> --port-file <dir>/port`, output to <dir>/out.txt.
  TandemProcess(const std::string& args, const std::filesystem::path& dir)
      : port_file_(dir / "port"), out_file_(dir / "out.txt") {
    std::filesystem::remove(port_file_);
    const std::string cmd = std::string(TANDEM_BINARY_DIR) + "/tandem " + args + " --port-file " +
                            port_file_.string() + " > " + out_file_.string() + " 2>&1";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~TandemProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  /// The port once the file appears; 0 when the process ended first or after 120 s.
  int wait_port() {
    for (int i = 0; i < 2400; ++i) {
      std::ifstream in(port_file_);
      int port = 0;
      if (in >> port && port > 0) return port;
      if (exited()) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return 0;
  }
  bool exited() {
    if (exited_) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    return exited_;
  }
  /// Waits for the end (SIGTERM first when `stop`); the exit code (-1: killed by a signal).
  int finish(bool stop) {
    if (!exited_) {
      if (stop) ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      exited_ = true;
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    return code_;
  }
  std::string output() const {
    std::ifstream in(out_file_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::filesystem::path port_file_, out_file_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
};

}  // namespace tandem::testing
