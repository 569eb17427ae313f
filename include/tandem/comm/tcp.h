// The tcp communicator: ranks that are processes started without MPI (torchrun, srun without
// PMI) meet at rank 0's address and port (MASTER_ADDR:MASTER_PORT) and exchange the
// collectives' buffers over TCP (src/comm/tcp/). Rank 0 listens; every other rank connects to it
// (retrying until the timeout, so the ranks may start in any order), says its rank and world
// size, and rank 0 answers once all have joined. Each collective then goes through rank 0 (a
// star): the ranks send their buffers, rank 0 combines them and sends back the result.
// Reductions are combined in the order of Open MPI's binomial tree (rank 0 adds rank 1, rank 2
// adds rank 3, ..., then rank 0 adds rank 2's partial sum, ...), which is what Open MPI 4.1's
// MPI_Iallreduce and MPI_Ireduce_scatter_block do for 2 and 3 ranks: the same bits as the mpi
// communicator there. 16-bit floats are rounded at every partial sum, as the mpi communicator's
// user-defined operation does; mean divides the sum on each rank afterwards, as it does.
// Errors: Error(distributed) naming the rank when a peer closes its connection (it ended or
// died), sends another operation than this rank's, or does not answer within the timeout;
// after a failure every later operation throws too. Error(invalid_argument) for a bad rank,
// world size or timeout; Error(io) when rank 0 cannot listen on the port or the address does not
// resolve. Thread-safety: calls are serialised inside the communicator.
#pragma once

#include <string>

#include "tandem/comm/communicator.h"

namespace tandem::comm {

/// Rank `rank` of `world_size` (>= 1) meeting at `master_addr`:`master_port` (rank 0 listens on
/// the port on every interface); returns once every rank joined, or throws after
/// `timeout_seconds` naming the ranks that did not. The timeout also bounds each operation.
CommunicatorPtr tcp_communicator(const std::string& master_addr, int master_port, int rank, int world_size,
                                 double timeout_seconds);

}  // namespace tandem::comm
