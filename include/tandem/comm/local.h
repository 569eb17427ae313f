// LocalGroup: world_size ranks that are threads (or replicas driven by threads) of one process,
// each with its own Communicator (tandem/comm/communicator.h). Rank r's operations meet the
// other ranks' operations of the same sequence number; reductions are summed in rank order
// 0, 1, ..., N-1 in fp32, so every rank gets the same bits, independent of thread timing.
// Buffers: host-addressable memory (cpu and virt tensors); operations run when the stream
// reaches them, each rank blocking (on its stream's thread) until all ranks arrived.
// A rank that does not arrive within the timeout makes the others throw Error(distributed)
// naming it; after that the group is broken and every later operation throws too.
// Thread-safety: each rank's communicator is used by one thread (or stream) at a time;
// different ranks from different threads.
#pragma once

#include <memory>
#include <vector>

#include "tandem/comm/communicator.h"

namespace tandem::comm {

class LocalGroup {
 public:
  /// Throws Error(invalid_argument) for world_size < 1 or timeout_seconds <= 0.
  explicit LocalGroup(int world_size, double timeout_seconds = 300);
  ~LocalGroup();
  int world_size() const;
  /// Rank r's communicator (shared; valid while the group lives). Throws for r out of range.
  CommunicatorPtr communicator(int rank) const;

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::vector<CommunicatorPtr> comms_;
};

}  // namespace tandem::comm
