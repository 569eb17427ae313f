// The nccl communicator: one GPU per rank, buffers in cuda memory, operations enqueued on the
// given cuda stream (ncclAllReduce, ncclBroadcast, ncclAllGather, ncclReduceScatter; barrier
// is a one-element all-reduce). The unique id is made by rank 0 and broadcast over the
// bootstrap (mpi) communicator. Built only with CUDA (src/comm/no_nccl otherwise).
// Errors: NCCL's result codes become Error(distributed) naming the operation and rank.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "backend/cuda/cuda_stream.h"
#include "comm/comm_util.h"
#include "tandem/device.h"

namespace tandem::comm {

namespace {

void check_nccl(ncclResult_t rc, int rank, const char* op) {
  TD_CHECK(rc == ncclSuccess, ErrorCode::distributed, kOp, "rank {}: nccl {} failed: {}", rank, op,
           ncclGetErrorString(rc));
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
    bootstrap->broadcast(id_buf, 0, runtime(DeviceKind::cpu).default_stream(0));
    std::memcpy(&id, id_buf.raw_data(), sizeof(id));
    TD_CHECK(cudaSetDevice(device_index) == cudaSuccess, ErrorCode::not_available, kOp, "rank {}: cuda:{} not usable",
             rank_, device_index);
    check_nccl(ncclCommInitRank(&comm_, size_, id, rank_), rank_, "init");
    set_timeout_seconds(bootstrap->timeout_seconds());
  }
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  const char* backend() const override { return "nccl"; }

  void all_reduce(const Tensor& buf, ReduceOp op, const Stream& stream) override {
    check_buffer(buf, "all_reduce buf", true);
    check_on_gpu(buf, "all_reduce");
    std::lock_guard<std::mutex> lock(mu_);
    check_nccl(ncclAllReduce(buf.raw_data(), buf.raw_data(), static_cast<size_t>(buf.numel()), nccl_type(buf.dtype()),
                             op == ReduceOp::mean ? ncclAvg : ncclSum, comm_, cuda_stream(stream)),
               rank_, "all_reduce");
  }
  void broadcast(const Tensor& buf, int root, const Stream& stream) override {
    check_buffer(buf, "broadcast buf", false);
    check_on_gpu(buf, "broadcast");
    std::lock_guard<std::mutex> lock(mu_);
    check_nccl(ncclBroadcast(buf.raw_data(), buf.raw_data(), buf.nbytes(), ncclUint8, root, comm_, cuda_stream(stream)),
               rank_, "broadcast");
  }
  void all_gather(const Tensor& send, const Tensor& recv, const Stream& stream) override {
    check_buffer(send, "all_gather send", false);
    check_blocks(send, recv, size_, false, "all_gather");
    check_on_gpu(send, "all_gather");
    std::lock_guard<std::mutex> lock(mu_);
    check_nccl(ncclAllGather(send.raw_data(), recv.raw_data(), send.nbytes(), ncclUint8, comm_, cuda_stream(stream)),
               rank_, "all_gather");
  }
  void reduce_scatter(const Tensor& send, const Tensor& recv, ReduceOp op, const Stream& stream) override {
    check_buffer(send, "reduce_scatter send", true);
    check_blocks(send, recv, size_, true, "reduce_scatter");
    check_on_gpu(send, "reduce_scatter");
    std::lock_guard<std::mutex> lock(mu_);
    check_nccl(ncclReduceScatter(send.raw_data(), recv.raw_data(), static_cast<size_t>(recv.numel()),
                                 nccl_type(recv.dtype()), op == ReduceOp::mean ? ncclAvg : ncclSum, comm_,
                                 cuda_stream(stream)),
               rank_, "reduce_scatter");
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

  std::mutex mu_;
  int rank_, size_, device_;
  ncclComm_t comm_ = nullptr;
  Tensor scratch_;
};

}  // namespace

bool nccl_built() { return true; }

CommunicatorPtr nccl_communicator(const CommunicatorPtr& bootstrap, int device_index) {
  TD_CHECK_ARG(bootstrap != nullptr, kOp, "nccl_communicator: expected a bootstrap communicator, got none");
  return std::make_shared<NcclCommunicator>(bootstrap, device_index);
}

}  // namespace tandem::comm
