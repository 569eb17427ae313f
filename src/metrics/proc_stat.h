// Readers of Linux's /proc for the utilisation sampler (proc(5)): cumulative CPU ticks of the
// machine per core, of this process and of its loader threads. Every reader returns what it
// could read (an empty vector or 0 when a file is missing, e.g. outside Linux); none throws.
// Thread-safety: pure functions of the files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::metrics::detail {

/// Ticks of one /proc/stat "cpu" line: not idle (user + nice + system + irq + softirq + steal)
/// and in all (the same plus idle + iowait).
struct CpuTicks {
  uint64_t busy = 0, total = 0;
};

/// [1 + cores]: the "cpu" line (all cores) first, then cpu0, cpu1, ...
std::vector<CpuTicks> read_cpu_ticks();
/// Parses the text of /proc/stat (read_cpu_ticks on a file's contents).
std::vector<CpuTicks> parse_cpu_ticks(const std::string& text);
/// utime + stime of a /proc/.../stat line (fields 14 and 15, counted after the ")" that ends
/// the command name, which may hold spaces); 0 when it cannot be parsed.
uint64_t parse_task_ticks(const std::string& stat_line);
/// utime + stime of this process, all threads.
uint64_t read_process_ticks();
/// utime + stime of the live threads of this process whose name (comm) is `name`.
uint64_t read_thread_ticks(const std::string& name);
/// Clock ticks per second (sysconf(_SC_CLK_TCK)).
double ticks_per_second();

}  // namespace tandem::metrics::detail
