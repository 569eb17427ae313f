// The nccl backend of a build without CUDA: every call says so.
#include "comm/comm_util.h"

namespace tandem::comm {

bool nccl_built() { return false; }

CommunicatorPtr nccl_communicator(const CommunicatorPtr&, int) {
  throw_error(ErrorCode::not_available, kOp, "tandem was built without NCCL (it needs the CUDA build)");
}

}  // namespace tandem::comm
