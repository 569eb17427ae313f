// Communicator: the collective operations of data-parallel training, one interface with
// implementations side by side (src/comm/):
//   local  ranks are threads of one process (LocalGroup, tandem/comm/local.h): tests, and
//          several replicas of one model in one process (CPU + GPU batch split)
//   mpi    ranks are processes started by mpirun (Open MPI); buffers in host memory (cpu,
//          and virt, whose memory the host addresses)
//   tcp    ranks are processes started without MPI (torchrun, srun without PMI) that meet at
//          MASTER_ADDR:MASTER_PORT (tandem/comm/tcp.h); buffers in host memory
//   nccl   ranks are processes, one GPU each; buffers in cuda memory; the NCCL unique id
//          travels over the host communicator (mpi or tcp). Built only with CUDA.
// A build without Open MPI or without CUDA links stubs whose constructors throw
// Error(not_available, "[comm] tandem was built without MPI" / "... without NCCL").
//
// Buffers are contiguous tensors of `numel` elements; reductions take f32, f16 or bf16 (half
// types are summed in fp32 and rounded once per rank, so every rank gets the same bits),
// broadcast and all_gather any dtype. Every operation is ENQUEUED on `stream` (a stream of the
// buffer's device): it starts after the work enqueued on it before and later work waits for
// it; on the cpu device streams are inline, so the call returns when the operation is done.
// Results are identical on every rank (reduction order is rank 0, 1, ..., N-1 for local;
// mpi and tcp: Open MPI's binomial tree for 2 and 3 ranks, ((x0 + x1) + x2), so both give the
// same bits; NCCL's own order otherwise, the same on all ranks).
//
// Ordering rule (as MPI's and NCCL's): every rank issues the same collectives in the same
// order. Issue them from one stream at a time; a rank that joins no more (it died, hangs, or
// issued another operation) makes the others fail after timeout_seconds() with
// Error(distributed) naming that rank where it is known, never a silent hang.
// Thread-safety: calls are serialised inside the communicator; see the ordering rule.
#pragma once

#include <memory>
#include <string>

#include "tandem/stream.h"
#include "tandem/tensor.h"

namespace tandem::comm {

enum class ReduceOp { sum, mean };  // mean: sum / world_size (PyTorch DDP averages gradients)

class Communicator {
 public:
  virtual ~Communicator() = default;
  /// This process's (or replica's) rank in [0, world_size()).
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// "local", "mpi" or "nccl".
  virtual const char* backend() const = 0;

  /// In place: every rank's `buf` becomes the element-wise reduction of all ranks' `buf`
  /// (same shape and dtype on every rank). f32, f16, bf16. Throws Error(invalid_argument) for
  /// another dtype or a non-contiguous buffer, Error(distributed) when a peer fails.
  virtual void all_reduce(const Tensor& buf, ReduceOp op, const Stream& stream) = 0;
  /// Every rank's `buf` becomes rank `root`'s. Any dtype.
  virtual void broadcast(const Tensor& buf, int root, const Stream& stream) = 0;
  /// `recv` ([world_size * send.numel()] elements, same dtype) becomes the ranks' `send`
  /// buffers one after another, rank 0 first. Any dtype.
  virtual void all_gather(const Tensor& send, const Tensor& recv, const Stream& stream) = 0;
  /// Reduces `send` ([world_size * recv.numel()] elements) over the ranks and leaves block
  /// `rank()` of the result in `recv`. f32, f16, bf16.
  virtual void reduce_scatter(const Tensor& send, const Tensor& recv, ReduceOp op, const Stream& stream) = 0;
  /// Returns (on the stream) once every rank has reached it.
  virtual void barrier(const Stream& stream) = 0;

  /// Seconds a rank waits in one operation for its peers before Error(distributed); > 0.
  void set_timeout_seconds(double seconds);
  double timeout_seconds() const { return timeout_seconds_; }

 protected:
  double timeout_seconds_ = 300;
};

using CommunicatorPtr = std::shared_ptr<Communicator>;

/// The MPI world of this process (mpirun -np N): MPI is initialised on the first call
/// (MPI_THREAD_MULTIPLE) and finalised at exit (aborted instead when an operation failed, so
/// the job ends rather than hangs). Thread-safe. Throws Error(not_available) in a build
/// without Open MPI.
CommunicatorPtr mpi_world();
/// Whether this build has Open MPI (the mpi backend).
bool mpi_built();
/// Declares that this process ends normally: MPI is then finalised at exit. Without it (an
/// error ended the process) the job is aborted at exit instead, so that the other ranks stop
/// rather than wait in their next collective for this one. No-op before mpi_world() and in a
/// build without MPI.
void mpi_exit_cleanly();
/// Declares the exit code of a process that an error ends (2: bad flags or input, 1: a
/// failure): the job is then aborted with it, so that mpirun exits with the code the same
/// error gives in one process, rather than 1. No-op in a build without MPI.
void mpi_exit_with(int code);
/// Rank, local rank, world size and rendezvous of this process, from its launcher's
/// environment, without initialising MPI (src/comm/launch.cpp; docs/distributed.md has the
/// table). The first launcher present, in this order, gives the values:
///   1. Open MPI's mpirun: OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE      (rendezvous mpi)
///   2. PMI (MPICH's Hydra, srun --mpi=pmi2): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID (mpi)
///   3. torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
///      MASTER_ADDR, MASTER_PORT                                                 (tcp)
///   4. a Slurm srun task (SLURM_STEP_ID set): SLURM_PROCID, SLURM_STEP_NUM_TASKS or
///      SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_TASKS_PER_NODE; tcp on
///      MASTER_ADDR/MASTER_PORT (defaults: 127.0.0.1 on one node, port 20000 + job id % 10000),
///      or mpi under srun --mpi=pmix (PMIX_RANK set).
/// A later launcher whose world size is the chosen one's must agree on the rank and local rank
/// (one of another size encloses the chosen one: torchrun or mpirun inside an srun step);
/// otherwise Error(invalid_argument) names both variables and values in one line. Also
/// Error(invalid_argument) for a variable that is no integer, a rank outside the world, or a
/// tcp rendezvous without MASTER_ADDR/MASTER_PORT where no default applies. {0, 1} when no
/// launcher started the process. Reads the environment at each call; thread-safe as getenv.
struct LaunchInfo {
  int rank = 0, world_size = 1;
  int local_rank = 0;        // among the ranks on this machine
  int local_world_size = 1;  // the ranks on this machine
  int node_rank = 0;         // this machine among the job's
  std::string launcher = "none";    // "mpirun", "pmi", "torchrun", "slurm" or "none"
  std::string rendezvous = "none";  // "mpi" (mpi_world()), "tcp" (tcp_world()) or "none"
  std::string master_addr;          // tcp: rank 0's host name or address
  int master_port = 0;              // tcp: rank 0's port
};
LaunchInfo launch_info();

/// The communicator of the ranks launch_info() describes: mpi_world() for an mpi rendezvous,
/// tcp_world() for a tcp one (timeout_seconds bounds the rendezvous and every operation).
/// Throws Error(invalid_argument) when the process was not launched as several ranks, and the
/// chosen communicator's errors.
CommunicatorPtr launched_world(double timeout_seconds);

/// The tcp communicator of this process (tandem/comm/tcp.h) over launch_info()'s MASTER_ADDR
/// and MASTER_PORT, made on the first call (later calls return it). Thread-safe.
CommunicatorPtr tcp_world(double timeout_seconds);

/// An NCCL communicator over the ranks of `bootstrap` (an mpi or tcp communicator: rank 0 makes the
/// unique id, broadcast carries it), on cuda device `device_index`. Buffers must be cuda
/// tensors and streams cuda streams. Throws Error(not_available, "[comm] tandem was built
/// without NCCL") in a build without CUDA.
CommunicatorPtr nccl_communicator(const CommunicatorPtr& bootstrap, int device_index);
/// The communicator for buffers on `device`: `host` itself for cpu and virt (host-addressable
/// memory), an nccl communicator bootstrapped over `host` for cuda.
CommunicatorPtr for_device(const CommunicatorPtr& host, Device device);
/// Whether this build has NCCL.
bool nccl_built();

}  // namespace tandem::comm
