// Internal: the entry points of the CUDA backend that the core calls directly (direct calls,
// so the objects are always linked from the static library). Defined by src/backend/cuda in
// a CUDA build and by src/backend/no_cuda otherwise; plain C++ (no CUDA headers).
#pragma once

#include "tandem/allocator.h"
#include "tandem/stream.h"

namespace tandem {

/// Called by the registry in src/backend/runtime_registry.cpp the first time DeviceKind::cuda is
/// requested. Registers the cuda ops backend too. Without CUDA it throws
/// Error(not_available, "[device] tandem was built without CUDA").
Runtime* create_cuda_runtime();

/// Page-locked host memory from cudaHostAlloc, for the pinned pool (tandem/pinned.h) to use
/// as its backing allocator; nullptr when the build has no CUDA or no device is present
/// (the pool then uses mlock'ed pages).
Allocator* cuda_pinned_backing();

}  // namespace tandem
