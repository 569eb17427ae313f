// The cuda backend instance, the op scope (device, the thread's current stream ordered after
// the arguments' pending writes, NVTX range, the outputs' event) and scratch memory from that
// stream's pool.
#include <exception>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"

namespace tandem::ops {
namespace {

int device_of(std::initializer_list<const Tensor*> reads, std::initializer_list<const Tensor*> writes) {
  for (auto* group : {&writes, &reads})
    for (const Tensor* t : *group)
      if (t->defined() && t->device().kind == DeviceKind::cuda) return t->device().index;
  return 0;
}

// Orders `stream` after the pending write of `t`, unless that write is ordered on it already.
void wait_for_pending_write(cuda_detail::CudaStream& stream, const Tensor& t) {
  if (!t.defined()) return;
  const Event& e = t.storage()->pending_write();
  if (!e.impl()) return;
  if (auto* ce = dynamic_cast<const cuda_detail::CudaEvent*>(e.impl().get()); ce && ce->stream() == stream.get())
    return;
  if (!e.query()) stream.wait(e.impl());
}

}  // namespace

CudaOpScope::CudaOpScope(const char* op, std::initializer_list<const Tensor*> reads,
                         std::initializer_list<const Tensor*> writes)
    : device(device_of(reads, writes)),
      stream(cuda_detail::current_stream(device).get()),
      guard(device),
      range(op),
      on_(&cuda_detail::current_stream(device)),
      exceptions_(std::uncaught_exceptions()) {
  TD_CHECK(writes.size() <= kMaxWrites, ErrorCode::internal, op, "{} outputs, at most {} supported", writes.size(),
           kMaxWrites);
  for (auto* group : {&reads, &writes})
    for (const Tensor* t : *group) wait_for_pending_write(*on_, *t);
  for (const Tensor* t : writes)
    if (t->defined()) writes_[num_writes_++] = t;
}

CudaOpScope::~CudaOpScope() {
  if (num_writes_ == 0 || std::uncaught_exceptions() > exceptions_) return;
  try {
    const Event done(on_->record());
    for (size_t i = 0; i < num_writes_; ++i) writes_[i]->storage()->set_pending_write(done);
  } catch (...) {
    // Recording failed only when the device is broken; the next CUDA call reports that.
  }
}

CudaScratch::CudaScratch(int device, size_t bytes)
    : device_(device), bytes_(bytes), ptr_(cuda_detail::device_state(device).allocator.allocate(bytes)) {}

CudaScratch::~CudaScratch() { cuda_detail::device_state(device_).allocator.deallocate(ptr_, bytes_); }

Backend& cuda_backend() {
  static CudaBackend b;
  return b;
}

}  // namespace tandem::ops
