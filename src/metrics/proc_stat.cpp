#include "proc_stat.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tandem::metrics::detail {

static std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<CpuTicks> parse_cpu_ticks(const std::string& text) {
  std::vector<CpuTicks> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.compare(0, 3, "cpu") != 0) continue;
    std::istringstream f(line);
    std::string name;
    uint64_t v[8] = {};  // user nice system idle iowait irq softirq steal (guest is in user)
    f >> name;
    for (uint64_t& x : v) f >> x;
    if (!f && !f.eof()) continue;
    CpuTicks t;
    t.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    t.total = t.busy + v[3] + v[4];
    out.push_back(t);
  }
  return out;
}

std::vector<CpuTicks> read_cpu_ticks() { return parse_cpu_ticks(read_text("/proc/stat")); }

uint64_t parse_task_ticks(const std::string& stat_line) {
  const size_t close = stat_line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream f(stat_line.substr(close + 1));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 13 && (f >> field); ++i) {
  }  // state (field 3) .. cmajflt (13)
  if (!(f >> utime >> stime)) return 0;
  return utime + stime;
}

uint64_t read_process_ticks() { return parse_task_ticks(read_text("/proc/self/stat")); }

uint64_t read_thread_ticks(const std::string& name) {
  uint64_t sum = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::string comm = read_text(e.path() / "comm");
    while (!comm.empty() && (comm.back() == '\n' || comm.back() == ' ')) comm.pop_back();
    if (comm == name) sum += parse_task_ticks(read_text(e.path() / "stat"));
  }
  return sum;
}

double ticks_per_second() {
  const long t = ::sysconf(_SC_CLK_TCK);
  return t > 0 ? static_cast<double>(t) : 100.0;
}

}  // namespace tandem::metrics::detail
