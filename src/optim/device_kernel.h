// Internal: runs a flat optimizer kernel where a parameter lives.
#pragma once

#include <functional>
#include <vector>

#include "tandem/stream.h"
#include "tandem/tensor.h"

namespace tandem::optim::detail {

/// Runs one update on the device of `tensors` (all on one non-host device):
///  - virt: `host_kernel` becomes one work item on virt_current_stream(index), after the
///    pending writes of every tensor; `written` then carry the item's event as their pending
///    write. Virt memory is host memory inside, so the kernel takes raw_data() pointers and
///    runs the same SIMD code as the cpu path (with the caller's OpenMP thread count).
///  - cuda: calls `cuda_kernel` with the device's default stream (where cuda ops run).
/// The work items keep `tensors` alive until they ran. Kernel errors on virt surface at the
/// stream's next synchronize(); validate arguments before calling.
void run_device_kernel(const std::vector<Tensor>& tensors, const std::vector<Tensor>& written,
                       std::function<void()> host_kernel,
                       const std::function<void(const Stream&)>& cuda_kernel);

/// raw_data() of an f32 tensor as float* (device memory: for kernels only).
inline float* f32_ptr(const Tensor& t) { return static_cast<float*>(t.raw_data()); }

}  // namespace tandem::optim::detail
