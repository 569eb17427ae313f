// Pinned host memory: the staging buffers of asynchronous host<->device copies.
//
// pinned_allocator() is the process-wide pool: a CachingAllocator (caching_allocator.h) whose
// segments are page-aligned host memory (blocks inside them are 512-byte aligned), locked into RAM
// with mlock when the system allows it (best effort; RLIMIT_MEMLOCK often forbids more than a few
// MiB). A CUDA build backs the same pool with cudaHostAlloc instead. Its device is cpu: tensors in
// it are ordinary host tensors.
//
// Buffer lifetime: a pinned block read by a host-to-device copy (or written by a
// device-to-host copy) must not be handed out again before that copy ran. Declare such uses
// with record_pinned_use(tensor, event) (or pinned_allocator().record_use(ptr, event)); a block
// freed while any of its events is pending is reused only after ALL of them completed, judged
// per block (a slow copy holds back only its own block).
//
// Thread-safety: all functions may be called from any thread.
#pragma once

#include "tandem/caching_allocator.h"
#include "tandem/tensor.h"

namespace tandem {

/// The process-wide pinned host pool (never destroyed: tensors may outlive main).
CachingAllocator& pinned_allocator();

/// An uninitialised host tensor in pinned memory, shape as given.
/// Throws Error(out_of_memory) when the pool cannot grow.
Tensor pinned_empty(const Shape& shape, DType dtype = DType::f32);
/// A pinned host copy of host tensor `host` (same shape and dtype, contiguous). Throws as
/// pinned_empty.
Tensor pinned_copy(const Tensor& host);

/// Marks `tensor` (allocated from pinned_allocator()) as used by asynchronous work completing
/// with `event`. Throws Error(invalid_argument) when the tensor is not from the pinned pool.
void record_pinned_use(const Tensor& tensor, const Event& event);

/// The page size pinned blocks are aligned to, in bytes.
size_t pinned_page_size();

}  // namespace tandem
