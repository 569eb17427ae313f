// Internal: the constructor of the cpu runtime, called by the registry
// (src/backend/runtime_registry.cpp) the first time DeviceKind::cpu is requested.
#pragma once

#include "tandem/stream.h"

namespace tandem {

Runtime* create_cpu_runtime();

}  // namespace tandem
