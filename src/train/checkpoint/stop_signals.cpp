#include "tandem/train/stop.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <thread>

#include "tandem/atomic_file.h"

namespace tandem::train {
namespace {

// The signals are blocked in every thread started after the StopSignals (threads inherit the
// mask) and taken by one thread in sigwait(), never by an asynchronous handler: a handler
// interrupts a compute thread mid-kernel, and on some virtual machines returning from it
// does not restore the vector registers intact (seen as heap corruption inside oneDNN's sgemm
// after a Ctrl-C). The thread is detached and lives until the process ends.
std::atomic<int> g_requested{0};
std::atomic<bool> g_active{false};
sigset_t g_set;

void say(const char* msg, size_t n) { (void)!::write(STDERR_FILENO, msg, n); }

void wait_loop() {
  for (;;) {
    int sig = 0;
    if (::sigwait(&g_set, &sig) != 0) continue;
    if (!g_active.load()) continue;  // between runs: ignore (the StopSignals is gone)
    int expected = 0;
    if (g_requested.compare_exchange_strong(expected, sig)) {
      static const char msg[] =
          "\ntandem: stopping after the current step (a checkpoint is written when --checkpoint-dir is set); "
          "press Ctrl-C (or send the signal) again to stop at once\n";
      say(msg, sizeof msg - 1);
      continue;
    }
    // The second one: leave at once, with nothing half-written behind.
    AtomicFile::remove_temporaries();
    static const char msg[] = "\ntandem: stopped at once\n";
    say(msg, sizeof msg - 1);
    ::_exit(128 + sig);
  }
}

}  // namespace

StopSignals::StopSignals() {
  g_requested.store(0);
  static const bool started = [] {
    sigemptyset(&g_set);
    for (int sig : {SIGINT, SIGTERM, SIGUSR1}) {  // SIGUSR1: Slurm's --signal=USR1@T before a requeue
      struct sigaction old {};
      ::sigaction(sig, nullptr, &old);
      if (old.sa_handler != SIG_IGN) sigaddset(&g_set, sig);  // a nohup'ed run stays so
    }
    ::pthread_sigmask(SIG_BLOCK, &g_set, nullptr);
    std::thread(wait_loop).detach();
    return true;
  }();
  (void)started;
  g_active.store(true);
  AtomicFile::defer_stop_signals(true);
}

StopSignals::~StopSignals() {
  AtomicFile::defer_stop_signals(false);
  g_active.store(false);
}

int StopSignals::requested() { return g_requested.load(std::memory_order_relaxed); }

}  // namespace tandem::train
