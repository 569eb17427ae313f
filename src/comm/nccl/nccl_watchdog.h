// NcclWatchdog: the timeout of the nccl communicator's operations. NCCL enqueues a collective
// on a cuda stream and returns; a peer that died or hangs leaves the collective's kernel
// spinning, and whatever waits for that stream waits for ever. The watchdog records a cuda
// event after each operation and one thread polls the events in issue order (cudaEventQuery)
// together with ncclCommGetAsyncError: an operation not done within the communicator's timeout
// (--dist-timeout), or an asynchronous NCCL error, makes it print the error line, abort the
// communicator (ncclCommAbort, which ends the spinning kernels so the stream's waiters return)
// and keep the error, which every later call of the communicator rethrows. The wording is the
// mpi communicator's: "[comm] rank R: OP got no answer within T s (--dist-timeout) from ...".
// (PyTorch's ProcessGroupNCCL watchdog follows the same scheme.)
// Thread-safety: watch() and rethrow_if_failed() from any thread; one internal poll thread.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

namespace tandem::comm {

class NcclWatchdog {
 public:
  /// Watches operations of `comm` (rank `rank` of `world_size`); `timeout_seconds()` is read
  /// at each poll (the communicator's setting may change).
  NcclWatchdog(ncclComm_t comm, int rank, int world_size, const double* timeout_seconds);
  /// Stops the poll thread (the events still pending are dropped).
  ~NcclWatchdog();
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  /// Records an event on `stream` after operation `op` (a static string) and watches it.
  /// Throws Error(distributed) when cudaEventRecord fails.
  void watch(const char* op, cudaStream_t stream);
  /// Rethrows the error that aborted the communicator, if any.
  void rethrow_if_failed();
  /// Whether the communicator was aborted (then it must not be destroyed again).
  bool aborted();
  /// The rank's view of a non-blocking NCCL call: waits while ncclCommGetAsyncError says
  /// ncclInProgress (up to the timeout, then aborts as for a hung operation) and returns the
  /// final result.
  ncclResult_t settle(ncclResult_t rc, const char* op);

 private:
  struct Pending {
    cudaEvent_t event;
    const char* op;
    std::chrono::steady_clock::time_point start;
  };
  void loop();
  void fail(const std::string& message);  // under mu_: print, abort, keep the error

  ncclComm_t comm_;
  int rank_, world_size_;
  const double* timeout_seconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::exception_ptr error_;
  bool aborted_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace tandem::comm
