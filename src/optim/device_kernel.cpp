#include "optim/device_kernel.h"

#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/virt.h"

namespace tandem::optim::detail {

void run_device_kernel(const std::vector<Tensor>& tensors, const std::vector<Tensor>& written,
                       std::function<void()> host_kernel,
                       const std::function<void(const Stream&)>& cuda_kernel) {
  TD_ASSERT(!tensors.empty());
  const Device dev = tensors.front().device();
  if (dev.kind == DeviceKind::cuda) {
    cuda_kernel(runtime(DeviceKind::cuda).default_stream(dev.index));
    return;
  }
  TD_CHECK(dev.kind == DeviceKind::virt, ErrorCode::internal, "optimizer",
           "no device kernel for tensors on {}", dev.str());
  const Stream stream = virt_current_stream(dev.index);
  for (const Tensor& t : tensors)
    if (!t.storage()->pending_write().query()) stream.wait(t.storage()->pending_write());
  const int threads = ops::get_num_threads();
  stream.enqueue([keep = tensors, threads, kernel = std::move(host_kernel)] {
    if (ops::get_num_threads() != threads) ops::set_num_threads(threads);
    kernel();
  });
  const Event done = stream.record();
  for (const Tensor& t : written) t.storage()->set_pending_write(done);
}

}  // namespace tandem::optim::detail
