#include "comm/nccl/nccl_watchdog.h"

#include <cstdio>

#include <fmt/format.h>

#include "comm/comm_util.h"

namespace tandem::comm {

namespace {
constexpr auto kPoll = std::chrono::milliseconds(2);

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

NcclWatchdog::NcclWatchdog(ncclComm_t comm, int rank, int world_size, const double* timeout_seconds)
    : comm_(comm), rank_(rank), world_size_(world_size), timeout_seconds_(timeout_seconds) {
  thread_ = std::thread([this] { loop(); });
}

NcclWatchdog::~NcclWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (const Pending& p : pending_) cudaEventDestroy(p.event);
}

void NcclWatchdog::watch(const char* op, cudaStream_t stream) {
  cudaEvent_t ev = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(ev, stream);
  TD_CHECK(e == cudaSuccess, ErrorCode::distributed, kOp, "rank {}: nccl {}: recording its event failed: {}", rank_, op,
           cudaGetErrorString(e));
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({ev, op, std::chrono::steady_clock::now()});
  }
  cv_.notify_all();
}

void NcclWatchdog::rethrow_if_failed() {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
}

bool NcclWatchdog::aborted() {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

void NcclWatchdog::fail(const std::string& message) {
  if (aborted_) return;
  std::fprintf(stderr, "%s; aborting the nccl communicator\n", message.c_str());
  std::fflush(stderr);
  ncclCommAbort(comm_);
  aborted_ = true;
  error_ = std::make_exception_ptr(Error(ErrorCode::distributed, message));
}

// The message of throw_timeout (the mpi communicator's wording).
static std::string timeout_message(int rank, const char* op, double seconds, int world_size) {
  try {
    throw_timeout(rank, op, seconds, other_ranks(rank, world_size));
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

ncclResult_t NcclWatchdog::settle(ncclResult_t rc, const char* op) {
  const auto t0 = std::chrono::steady_clock::now();
  while (rc == ncclInProgress) {
    if (seconds_since(t0) > *timeout_seconds_) {
      std::lock_guard<std::mutex> lock(mu_);
      fail(timeout_message(rank_, op, *timeout_seconds_, world_size_));
      std::rethrow_exception(error_);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    ncclCommGetAsyncError(comm_, &rc);
  }
  return rc;
}

void NcclWatchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (pending_.empty() || aborted_) {
      cv_.wait(lock, [&] { return stop_ || (!pending_.empty() && !aborted_); });
      continue;
    }
    const Pending p = pending_.front();
    const cudaError_t q = cudaEventQuery(p.event);
    if (q == cudaSuccess) {
      cudaEventDestroy(p.event);
      pending_.pop_front();
      continue;
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      fail(fmt::format("[{}] rank {}: nccl {} failed: {}", kOp, rank_, p.op, ncclGetErrorString(async)));
    } else if (q != cudaErrorNotReady) {
      fail(fmt::format("[{}] rank {}: nccl {}: its stream failed: {}", kOp, rank_, p.op, cudaGetErrorString(q)));
    } else if (seconds_since(p.start) > *timeout_seconds_) {
      fail(timeout_message(rank_, p.op, *timeout_seconds_, world_size_));
    } else {
      cv_.wait_for(lock, kPoll, [&] { return stop_; });
    }
  }
}

}  // namespace tandem::comm
