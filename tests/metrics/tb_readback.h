// Reads a TensorBoard log folder back with TensorBoard's EventAccumulator through
// scripts/read_tensorboard.py in the peers venv (/opt/peers/bin/python, or $TANDEM_PEERS_PYTHON).
// `available` is false, with the reason in `why`, when that Python or its tensorboard package
// is missing: the calling test skips then.
#pragma once

#include <unistd.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::metrics {

struct TbReadback {
  bool available = false, ok = false;
  std::string why;
  std::map<std::string, std::vector<std::pair<int64_t, float>>> scalars;  // tag -> (step, value)
};

inline TbReadback read_with_tensorboard(const std::string& dir) {
  TbReadback r;
  const char* env = std::getenv("TANDEM_PEERS_PYTHON");
  const std::string python = env ? env : "/opt/peers/bin/python";
  if (::access(python.c_str(), X_OK) != 0) {
    r.why = python + " not found (the peers venv with the tensorboard package)";
    return r;
  }
  const std::string cmd = python + " " + TANDEM_SOURCE_DIR + "/scripts/read_tensorboard.py '" + dir + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    r.why = "cannot run " + cmd;
    return r;
  }
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 3) {
    r.why = "the peers venv has no tensorboard package: " + out;
    return r;
  }
  r.available = true;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (code != 0 || !j.is_object()) {
    r.why = "read_tensorboard.py failed (" + std::to_string(code) + "): " + out;
    return r;
  }
  for (const auto& [tag, events] : j.items())
    for (const auto& e : events) r.scalars[tag].emplace_back(e[0].get<int64_t>(), e[1].get<float>());
  r.ok = true;
  return r;
}

}  // namespace tandem::metrics
