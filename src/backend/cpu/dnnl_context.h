// Shared oneDNN state for the cpu backend: one engine, a stream per thread, and a cache of
// primitives keyed by their shapes and parameters (creating a primitive costs far more than
// running a small one).
// Cached primitives run on whichever thread calls the op (the main thread, virt stream
// workers, loader threads). oneDNN's default ("library") scratchpad is a per-thread buffer
// the primitive binds to at creation, so a primitive created on one thread and run on
// another reads a buffer that is missing or too small there. Every primitive here is
// therefore created with primitive_attr() (scratchpad_mode::user) and executed with
// scratchpad(pd.scratchpad_desc()) passed as DNNL_ARG_SCRATCHPAD: a growable buffer owned by
// the calling thread.
// Thread-safety: engine() is shared; stream() and scratchpad() belong to the calling thread;
// cached() is thread-safe and each entry carries a mutex its user holds while executing
// (entries own layout buffers).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "tandem/dtype.h"

namespace tandem::ops::cpu {

dnnl::engine& engine();
/// The calling thread's oneDNN stream (execution is synchronous on the cpu engine).
dnnl::stream& stream();
/// Attributes every cached primitive (and reorder) is created with: user scratchpad mode.
const dnnl::primitive_attr& primitive_attr();
/// A memory object for a primitive's scratchpad of descriptor `md`, backed by a buffer that
/// belongs to the calling thread and grows to the largest size asked for (never shrinks).
/// Valid until the calling thread asks for a larger one; use it for one execute at a time.
dnnl::memory scratchpad(const dnnl::memory::desc& md);

/// Base of cached entries; `mu` serialises use of one entry's scratch buffers.
struct CacheEntry {
  virtual ~CacheEntry() = default;
  std::mutex mu;
};

/// Returns the entry for `key`, building it with `make` on first use. The key must name
/// every shape and parameter the entry depends on; the thread count is appended here.
std::shared_ptr<CacheEntry> cached(const std::string& key, const std::function<std::shared_ptr<CacheEntry>()>& make);

template <typename T>
std::shared_ptr<T> cached_as(const std::string& key, const std::function<std::shared_ptr<T>()>& make) {
  return std::static_pointer_cast<T>(cached(key, [&] { return std::static_pointer_cast<CacheEntry>(make()); }));
}

/// A plain (row-major) memory descriptor for f32 dims.
dnnl::memory::desc plain_md(const dnnl::memory::dims& dims);
/// A plain (row-major) memory descriptor for dims of element type `dt`.
dnnl::memory::desc plain_md(const dnnl::memory::dims& dims, dnnl::memory::data_type dt);
/// oneDNN's element type for an f32, bf16 or f16 tensor.
dnnl::memory::data_type dnnl_type(DType dtype);

}  // namespace tandem::ops::cpu

namespace tandem::ops::cpu {

/// One primitive argument whose caller-side layout is plain (row-major) while the primitive
/// may prefer another (e.g. blocked nChw8c). When they differ the operand owns a buffer in
/// the primitive's layout and a cached reorder between the two.
struct Operand {
  dnnl::memory::desc user_md;
  dnnl::memory::desc prim_md;
  bool needs_reorder = false;
  dnnl::memory buf;
  dnnl::reorder reorder;
  dnnl::memory::desc reorder_scratchpad;

  /// `input`: data flows user -> primitive; otherwise primitive -> user.
  void init(const dnnl::memory::desc& user, const dnnl::memory::desc& prim, bool input);
  /// The memory to pass to the primitive for an input at `p` (reordered into buf if needed).
  dnnl::memory input(const void* p);
  /// The memory the primitive should write for an output at `p`.
  dnnl::memory output(void* p);
  /// After the primitive ran: copies buf into the user buffer at `p` if needed.
  void finish_output(void* p);
};

}  // namespace tandem::ops::cpu
