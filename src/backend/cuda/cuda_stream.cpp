// CUDA streams and events.
#include "backend/cuda/cuda_stream.h"

#include <utility>

#include "backend/cuda/cuda_check.h"
#include "tandem/error.h"

namespace tandem::cuda_detail {

CudaEvent::CudaEvent(int device, cudaStream_t stream) : device_(device) {
  DeviceGuard guard(device_);
  TD_CUDA(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  const cudaError_t err = cudaEventRecord(event_, stream);
  if (err != cudaSuccess) {
    cudaEventDestroy(event_);
    throw_cuda_error("cudaEventRecord(event, stream)", err);
  }
}

CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);  // errors ignored: may run after CUDA shut down
}

bool CudaEvent::query() const {
  const cudaError_t err = cudaEventQuery(event_);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  throw_cuda_error("cudaEventQuery(event)", err);
}

void CudaEvent::synchronize() { TD_CUDA(cudaEventSynchronize(event_)); }

CudaStream::CudaStream(int device) : device_(device) {
  DeviceGuard guard(device_);
  TD_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaStream::~CudaStream() {
  release_finished();
  if (stream_) cudaStreamDestroy(stream_);  // returns at once; queued work still completes
}

namespace {

struct HostWork {
  std::function<void()> work;
  std::shared_ptr<CudaStream::ErrorSlot> errors;
};

void run_host_work(void* arg) {
  std::unique_ptr<HostWork> w(static_cast<HostWork*>(arg));
  std::exception_ptr error;
  try {
    w->work();
  } catch (...) {
    error = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(w->errors->mu);
  if (error && !w->errors->first) w->errors->first = error;
  w->errors->finished.push_back(std::move(w->work));  // destroyed later, outside the callback
}

}  // namespace

void CudaStream::release_finished() {
  std::vector<std::function<void()>> done;
  {
    std::lock_guard<std::mutex> lock(errors_->mu);
    done.swap(errors_->finished);
  }
}

void CudaStream::enqueue(std::function<void()> work) {
  release_finished();
  auto w = std::make_unique<HostWork>(HostWork{std::move(work), errors_});
  DeviceGuard guard(device_);
  TD_CUDA(cudaLaunchHostFunc(stream_, run_host_work, w.get()));
  w.release();  // owned by the callback now
}

std::shared_ptr<EventImpl> CudaStream::record() { return std::make_shared<CudaEvent>(device_, stream_); }

void CudaStream::wait(std::shared_ptr<EventImpl> event) {
  if (auto* ce = dynamic_cast<CudaEvent*>(event.get())) {
    DeviceGuard guard(device_);
    TD_CUDA(cudaStreamWaitEvent(stream_, ce->get(), 0));
    return;
  }
  if (event->query()) return;
  // An event of another device kind (virt, a host event): a host function in stream order
  // holds back later work until it completed.
  enqueue([event] { event->synchronize(); });
}

void CudaStream::synchronize() {
  {
    DeviceGuard guard(device_);
    TD_CUDA(cudaStreamSynchronize(stream_));
  }
  release_finished();
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(errors_->mu);
    e = std::exchange(errors_->first, nullptr);
  }
  if (e) std::rethrow_exception(e);
}

CudaStream& as_cuda_stream(const Stream& stream, const char* op) {
  TD_CHECK_ARG(static_cast<bool>(stream), op, "no stream given: expected a cuda stream");
  auto* cs = dynamic_cast<CudaStream*>(stream.impl());
  TD_CHECK_ARG(cs != nullptr, op, "expected a cuda stream, got a stream of {}", stream.device().str());
  return *cs;
}

}  // namespace tandem::cuda_detail
