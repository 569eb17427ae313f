// Shared oneDNN state for the cpu backend: one engine and stream, and a cache of primitives
// keyed by their shapes and parameters (creating a primitive costs far more than running a
// small one). Thread-safety: engine()/stream() are safe to share; cached() is thread-safe and
// each entry carries a mutex its user holds while executing (entries own scratch buffers).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

namespace tandem::ops::cpu {

dnnl::engine& engine();
dnnl::stream& stream();

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
