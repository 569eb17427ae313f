// Internal: the constructor of the virt runtime, called by the registry in
// src/backend/runtime_registry.cpp the first time DeviceKind::virt is requested (a direct call, so the
// object file is always linked from the static library).
#pragma once

#include "tandem/stream.h"

namespace tandem {

Runtime* create_virt_runtime();

}  // namespace tandem
