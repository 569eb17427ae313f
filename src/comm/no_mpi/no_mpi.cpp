// The mpi backend of a build without Open MPI: every call says so.
#include "comm/comm_util.h"

namespace tandem::comm {

bool mpi_built() { return false; }

void mpi_exit_cleanly() {}

void mpi_exit_with(int) {}

CommunicatorPtr mpi_world() {
  throw_error(ErrorCode::not_available, kOp,
              "tandem was built without MPI (install libopenmpi-dev and rebuild to run under mpirun)");
}

}  // namespace tandem::comm
