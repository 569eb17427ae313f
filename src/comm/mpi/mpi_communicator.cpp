// The mpi communicator: the processes of mpirun's MPI_COMM_WORLD, buffers in host memory.
// Each operation is MPI's nonblocking collective (MPI-3: MPI_Iallreduce, ...) polled with
// MPI_Test until it completes or the timeout passes, so a peer that died or hangs gives an
// Error(distributed) instead of a hang. 16-bit floats are combined by a user-defined MPI_Op
// (each partial sum rounded to the type, as NCCL does), so they travel as 2 bytes.
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "comm/comm_util.h"

namespace tandem::comm {

namespace {

bool g_failed = false;  // an operation failed: end the job with MPI_Abort at exit
bool g_clean = false;   // mpi_exit_cleanly() was called
int g_abort_code = 1;   // the code the job is aborted with (mpi_exit_with)

void at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (g_failed || !g_clean) {
    MPI_Abort(MPI_COMM_WORLD, g_abort_code);  // peers still blocked in a collective must not hang
    return;
  }
  MPI_Finalize();
}

template <typename ToF, typename FromF>
void half_sum(void* in, void* inout, int* len, ToF to_f, FromF from_f) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = from_f(to_f(a[i]) + to_f(b[i]));
}
void f16_sum(void* in, void* inout, int* len, MPI_Datatype*) { half_sum(in, inout, len, f16_to_float, float_to_f16); }
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  half_sum(in, inout, len, bf16_to_float, float_to_bf16);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    TD_CHECK(rc == MPI_SUCCESS, ErrorCode::not_available, kOp, "MPI_Init_thread failed (error {})", rc);
    std::atexit(at_exit);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Type_contiguous(2, MPI_BYTE, &half_type_);
    MPI_Type_commit(&half_type_);
    MPI_Op_create(f16_sum, 1, &f16_op_);
    MPI_Op_create(bf16_sum, 1, &bf16_op_);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  const char* backend() const override { return "mpi"; }

  void all_reduce(const Tensor& buf, ReduceOp op, const Stream& stream) override {
    check_buffer(buf, "all_reduce buf", true);
    stream.enqueue_host([this, buf, op] {
      run("all_reduce", [&](MPI_Request* req) {
        return MPI_Iallreduce(MPI_IN_PLACE, buf.raw_data(), count(buf), type(buf.dtype()), sum_op(buf.dtype()), comm_,
                              req);
      });
      finish_mean(buf, op, size_);
    });
  }

  void broadcast(const Tensor& buf, int root, const Stream& stream) override {
    check_buffer(buf, "broadcast buf", false);
    TD_CHECK_ARG(root >= 0 && root < size_, kOp, "broadcast: root {} outside [0, {})", root, size_);
    stream.enqueue_host([this, buf, root] {
      run("broadcast", [&](MPI_Request* req) {
        return MPI_Ibcast(buf.raw_data(), bytes(buf), MPI_BYTE, root, comm_, req);
      });
    });
  }

  void all_gather(const Tensor& send, const Tensor& recv, const Stream& stream) override {
    check_buffer(send, "all_gather send", false);
    check_buffer(recv, "all_gather recv", false);
    check_blocks(send, recv, size_, false, "all_gather");
    stream.enqueue_host([this, send, recv] {
      run("all_gather", [&](MPI_Request* req) {
        return MPI_Iallgather(send.raw_data(), bytes(send), MPI_BYTE, recv.raw_data(), bytes(send), MPI_BYTE, comm_,
                              req);
      });
    });
  }

  void reduce_scatter(const Tensor& send, const Tensor& recv, ReduceOp op, const Stream& stream) override {
    check_buffer(send, "reduce_scatter send", true);
    check_buffer(recv, "reduce_scatter recv", true);
    check_blocks(send, recv, size_, true, "reduce_scatter");
    stream.enqueue_host([this, send, recv, op] {
      run("reduce_scatter", [&](MPI_Request* req) {
        return MPI_Ireduce_scatter_block(send.raw_data(), recv.raw_data(), count(recv), type(recv.dtype()),
                                         sum_op(recv.dtype()), comm_, req);
      });
      finish_mean(recv, op, size_);
    });
  }

  void barrier(const Stream& stream) override {
    stream.enqueue_host([this] { run("barrier", [&](MPI_Request* req) { return MPI_Ibarrier(comm_, req); }); });
  }

 private:
  static int count(const Tensor& t) {
    TD_CHECK_ARG(t.numel() <= INT32_MAX, kOp, "buffer of {} elements: expected at most 2^31 - 1", t.numel());
    return static_cast<int>(t.numel());
  }
  static int bytes(const Tensor& t) {
    TD_CHECK_ARG(t.nbytes() <= INT32_MAX, kOp, "buffer of {} bytes: expected at most 2^31 - 1", t.nbytes());
    return static_cast<int>(t.nbytes());
  }
  MPI_Datatype type(DType d) const { return d == DType::f32 ? MPI_FLOAT : half_type_; }
  MPI_Op sum_op(DType d) const { return d == DType::f32 ? MPI_SUM : d == DType::f16 ? f16_op_ : bf16_op_; }

  // Starts the operation and polls it until done; throws Error(distributed) on an MPI error or
  // after the timeout (the job is then aborted at exit).
  template <typename Start>
  void run(const char* op, Start&& start_op) {
    std::lock_guard<std::mutex> lock(mu_);
    if (g_failed) throw_error(ErrorCode::distributed, kOp, fmt::format("rank {}: {} after an earlier failure", rank_, op));
    MPI_Request req = MPI_REQUEST_NULL;
    check(start_op(&req), op);
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_seconds());
    const auto start = Clock::now();
    for (;;) {
      int done = 0;
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), op);  // also drives MPI's progress
      if (done) return;
      const auto now = Clock::now();
      if (now > deadline) {
        g_failed = true;
        throw_timeout(rank_, op, timeout_seconds(), other_ranks(rank_, size_));
      }
      // A large message needs many progress calls: keep testing (yielding the core to other
      // threads) while the operation is young; a peer that is late by more than 20 ms is
      // waited for in 200 us sleeps, so a long wait costs no core.
      if (now - start < std::chrono::milliseconds(20)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  }
  void check(int rc, const char* op) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    g_failed = true;
    throw_error(ErrorCode::distributed, kOp,
                fmt::format("rank {}: {} failed: {} (a peer rank died or the network failed)", rank_, op,
                            std::string(text, static_cast<size_t>(len))));
  }

  std::mutex mu_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  MPI_Datatype half_type_ = MPI_DATATYPE_NULL;
  MPI_Op f16_op_ = MPI_OP_NULL, bf16_op_ = MPI_OP_NULL;
};

}  // namespace

bool mpi_built() { return true; }

void mpi_exit_cleanly() { g_clean = true; }

void mpi_exit_with(int code) { g_abort_code = code; }

CommunicatorPtr mpi_world() {
  static std::mutex mu;
  static CommunicatorPtr world;
  std::lock_guard<std::mutex> lock(mu);
  if (!world) world = std::make_shared<MpiCommunicator>();
  return world;
}

}  // namespace tandem::comm
