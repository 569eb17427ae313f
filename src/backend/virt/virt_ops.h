// Internal: the virt ops backend (cpu kernels run as work items on virt streams).
#pragma once

#include "tandem/backend.h"

namespace tandem {

/// The process-wide virt backend; registered by create_virt_runtime().
ops::Backend& virt_ops_backend();

}  // namespace tandem
