// Internal: the headers the transformer kernel units (cpu_transformer_avx2.cpp,
// cpu_transformer_avx512.cpp) include before their target pragma: everything with
// external-linkage inline functions, so that none of it is emitted with the unit's
// instruction set (the linker could keep that copy for callers on any CPU).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/cpu_scratch.h"
#include "backend/cpu/cpu_transformer_kernels.h"
#include "tandem/error.h"
