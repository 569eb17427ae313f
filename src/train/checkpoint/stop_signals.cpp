#include "tandem/train/stop.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

#include "tandem/atomic_file.h"

namespace tandem::train {
namespace {

std::atomic<int> g_requested{0};
constexpr int kStop[] = {SIGINT, SIGTERM};
struct sigaction g_old[2];
bool g_set[2];

extern "C" void on_stop_signal(int sig) {
  int expected = 0;
  if (!g_requested.compare_exchange_strong(expected, sig)) {
    // The second one: leave at once, with nothing half-written behind.
    AtomicFile::remove_temporaries();
    static const char msg[] = "\ntandem: stopped at once\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(128 + sig);
  }
  static const char msg[] =
      "\ntandem: stopping after the current step (a checkpoint is written when --checkpoint-dir is set); "
      "press Ctrl-C again to stop at once\n";
  (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
}

}  // namespace

StopSignals::StopSignals() {
  g_requested.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < 2; ++i) {
    ::sigaction(kStop[i], nullptr, &g_old[i]);
    g_set[i] = g_old[i].sa_handler != SIG_IGN;
    if (g_set[i]) ::sigaction(kStop[i], &sa, nullptr);
  }
  AtomicFile::defer_stop_signals(true);
}

StopSignals::~StopSignals() {
  AtomicFile::defer_stop_signals(false);
  for (int i = 0; i < 2; ++i)
    if (g_set[i]) ::sigaction(kStop[i], &g_old[i], nullptr);
}

int StopSignals::requested() { return g_requested.load(std::memory_order_relaxed); }

}  // namespace tandem::train
