// The nccl communicator: one GPU per rank, buffers in cuda memory, operations enqueued on the
// given cuda stream (ncclAllReduce, ncclBroadcast, ncclAllGather, ncclReduceScatter; barrier
// is a one-element all-reduce). The unique id is made by rank 0 and broadcast over the
// bootstrap (mpi) communicator. Built only with CUDA (src/comm/no_nccl otherwise).
// The communicator is non-blocking (ncclCommInitRankConfig, blocking = 0): its calls return
// ncclInProgress while NCCL still sets them up, and the rank then polls ncclCommGetAsyncError,
// so neither the set-up nor a collective can wait for a dead peer for ever; a NcclWatchdog
// (nccl_watchdog.h) follows every enqueued operation and aborts the communicator after
// timeout_seconds() (--dist-timeout) with the mpi communicator's message naming the operation.
// Errors: NCCL's result codes become Error(distributed) naming the operation and rank.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "backend/cuda/cuda_stream.h"
#include "comm/comm_util.h"
#include "comm/nccl/nccl_watchdog.h"
#include "tandem/device_traits.h"
#include "tandem/device.h"

namespace tandem::comm {

namespace {

// `in_progress_ok`: a non-blocking call's ncclInProgress is no failure (the caller settles it).
void check_nccl(ncclResult_t rc, int rank, const char* op, bool in_progress_ok = false) {
  TD_CHECK(rc == ncclSuccess || (in_progress_ok && rc == ncclInProgress), ErrorCode::distributed, kOp,
           "rank {}: nccl {} failed: {}", rank, op, ncclGetErrorString(rc));
}

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8: return ncclUint8;
  }
  return ncclUint8;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const CommunicatorPtr& bootstrap, int device_index)
      : rank_(bootstrap->rank()), size_(bootstrap->world_size()), device_(device_index) {
    ncclUniqueId id;
    Tensor id_buf = Tensor::zeros({static_cast<int64_t>(sizeof(id))}, DType::u8);
    if (rank_ == 0) {
      check_nccl(ncclGetUniqueId(&id), rank_, "get unique id");
      std::memcpy(id_buf.raw_data(), &id, sizeof(id));
    }
    bootstrap->broadcast(id_buf, 0, host_stream());
    std::memcpy(&id, id_buf.raw_data(), sizeof(id));
    TD_CHECK(cudaSetDevice(device_index) == cudaSuccess, ErrorCode::not_available, kOp, "rank {}: cuda:{} not usable",
             rank_, device_index);
    set_timeout_seconds(bootstrap->timeout_seconds());
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    check_nccl(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), rank_, "init", true);
    watchdog_ = std::make_unique<NcclWatchdog>(comm_, rank_, size_, &timeout_seconds_);
    check_nccl(watchdog_->settle(ncclInProgress, "nccl init"), rank_, "init");
  }
  ~NcclCommunicator() override {
    const bool aborted = watchdog_ && watchdog_->aborted();
    watchdog_.reset();
    if (comm_ && !aborted) ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  const char* backend() const override { return "nccl"; }

  void all_reduce(const Tensor& buf, ReduceOp op, const Stream& stream) override {
    check_buffer(buf, "all_reduce buf", true);
    check_on_gpu(buf, "all_reduce");
    run("all_reduce", [&](cudaStream_t cs) {
      return ncclAllReduce(buf.raw_data(), buf.raw_data(), static_cast<size_t>(buf.numel()), nccl_type(buf.dtype()),
                           op == ReduceOp::mean ? ncclAvg : ncclSum, comm_, cs);
    }, stream);
  }
  void broadcast(const Tensor& buf, int root, const Stream& stream) override {
    check_buffer(buf, "broadcast buf", false);
    check_on_gpu(buf, "broadcast");
    run("broadcast", [&](cudaStream_t cs) {
      return ncclBroadcast(buf.raw_data(), buf.raw_data(), buf.nbytes(), ncclUint8, root, comm_, cs);
    }, stream);
  }
  void all_gather(const Tensor& send, const Tensor& recv, const Stream& stream) override {
    check_buffer(send, "all_gather send", false);
    check_blocks(send, recv, size_, false, "all_gather");
    check_on_gpu(send, "all_gather");
    run("all_gather", [&](cudaStream_t cs) {
      return ncclAllGather(send.raw_data(), recv.raw_data(), send.nbytes(), ncclUint8, comm_, cs);
    }, stream);
  }
  void reduce_scatter(const Tensor& send, const Tensor& recv, ReduceOp op, const Stream& stream) override {
    check_buffer(send, "reduce_scatter send", true);
    check_blocks(send, recv, size_, true, "reduce_scatter");
    check_on_gpu(send, "reduce_scatter");
    run("reduce_scatter", [&](cudaStream_t cs) {
      return ncclReduceScatter(send.raw_data(), recv.raw_data(), static_cast<size_t>(recv.numel()),
                               nccl_type(recv.dtype()), op == ReduceOp::mean ? ncclAvg : ncclSum, comm_, cs);
    }, stream);
  }
  void barrier(const Stream& stream) override {
    if (!scratch_.defined()) scratch_ = Tensor::zeros({1}, DType::f32, Device(DeviceKind::cuda, device_));
    all_reduce(scratch_, ReduceOp::sum, stream);
  }

 private:
  void check_on_gpu(const Tensor& t, const char* op) const {
    TD_CHECK_ARG(t.device() == Device(DeviceKind::cuda, device_), kOp,
                 "{}: the nccl communicator of rank {} takes cuda:{} tensors, got one on {}", op, rank_, device_,
                 t.device().str());
  }
  cudaStream_t cuda_stream(const Stream& s) const {
    auto* cs = dynamic_cast<cuda_detail::CudaStream*>(s.impl());
    TD_CHECK_ARG(cs != nullptr, kOp, "the nccl communicator runs on cuda streams, got one of {}", s.device().str());
    return cs->get();
  }

  // Enqueues one collective (`call` with the cuda stream), settles a non-blocking return and
  // hands the operation to the watchdog. Under mu_: one collective at a time.
  template <typename Call>
  void run(const char* op, Call call, const Stream& stream) {
    const cudaStream_t cs = cuda_stream(stream);
    std::lock_guard<std::mutex> lock(mu_);
    watchdog_->rethrow_if_failed();
    check_nccl(watchdog_->settle(call(cs), op), rank_, op);
    watchdog_->watch(op, cs);
  }

  std::mutex mu_;
  int rank_, size_, device_;
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<NcclWatchdog> watchdog_;
  Tensor scratch_;
};

}  // namespace

bool nccl_built() { return true; }

CommunicatorPtr nccl_communicator(const CommunicatorPtr& bootstrap, int device_index) {
  TD_CHECK_ARG(bootstrap != nullptr, kOp, "nccl_communicator: expected a bootstrap communicator, got none");
  return std::make_shared<NcclCommunicator>(bootstrap, device_index);
}

}  // namespace tandem::comm
